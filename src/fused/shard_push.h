// All-gather + GEMM's shard pushes by SMs (FC_AGMM_ENGINE_PUSH=sm; shard_push.cu): our
// shard of A stored into every peer's workspace in pieces, each flagged in the peer's
// push flag for us as the copy queue's pushes flag it.
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
  int ctas = 32;
};

// Enqueue the push kernel on `stream` behind the op's entry barrier (pdl: launched
// with programmatic stream serialization, so that the GEMM behind it launches at once;
// it waits for the barrier's completion before it stores anything).
fcResult_t launchShardPush(const DeviceComm& dc, int channel, const ShardPush& p, bool pdl, cudaStream_t stream);

}  // namespace fc
