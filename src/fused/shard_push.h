// All-gather + GEMM's shard pushes (fused/allgather_matmul.cc, viaEnginePush): our shard
// of A into every peer's workspace in pieces, each flagged in the peer's push flag for us
// (the number of pieces landed), by the copy queue or (FC_AGMM_ENGINE_PUSH=sm) by a
// kernel on a few SMs (shard_push.cu). One description, two movers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/result.h"
#include "device/device_comm.h"

namespace fc {

struct ShardPush {
  const char* src = nullptr;              // our shard: rows x rowBytes, row-major
  char* dst[kMaxRanks - 1] = {};          // where it goes in each peer's workspace (same layout)
  uint32_t* flag[kMaxRanks - 1] = {};     // each peer's push flag for us
  int npeers = 0;
  size_t rows = 0, rowBytes = 0;          // rowBytes a multiple of 16
  // Pieces of rows (pieceRows each) or, byColumns, of columns (pieceBytes of every row,
  // a multiple of 16; the last: the rest); at most kMaxPushPieces.
  bool byColumns = false;
  size_t pieceRows = 0, pieceBytes = 0;
  int pieces = 1;
  int ctas = 0;  // the kernel's CTAs (tuning::kAgmmPushCtas)
};

// Piece c: rows [row0, row0 + rows) x bytes [byte0, byte0 + bytes) of every row.
struct ShardPiece {
  size_t row0, rows, byte0, bytes;
};
#ifdef __CUDACC__
__host__ __device__
#endif
inline ShardPiece pieceOf(const ShardPush& p, int c) {
  if (p.byColumns) {
    const size_t b0 = size_t(c) * p.pieceBytes;
    return {0, p.rows, b0, b0 + p.pieceBytes < p.rowBytes ? p.pieceBytes : p.rowBytes - b0};
  }
  const size_t r0 = size_t(c) * p.pieceRows;
  return {r0, r0 + p.pieceRows < p.rows ? p.pieceRows : p.rows - r0, 0, p.rowBytes};
}

// Enqueue the push kernel on `stream` behind the op's entry barrier (pdl: launched
// with programmatic stream serialization, so that the GEMM behind it launches at once;
// it waits for the barrier's completion before it stores anything).
fcResult_t launchShardPush(const DeviceComm& dc, int channel, const ShardPush& p, bool pdl, cudaStream_t stream);

}  // namespace fc
