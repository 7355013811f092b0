// Fused compute + communication ops: orchestration of the copy engine
// (src/collectives), the barrier kernels and cuBLASLt GEMMs (src/gemm) on the
// caller's stream and the channel's copy queue. Arguments are validated by src/api.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/copy_queue.h"
#include "device/device_comm.h"
#include "fusedcomm.h"
#include "gemm/gemm.h"

namespace fc {

// Engine: the persistent GEMM engine (fcAllGatherMatmul only, src/gemm/engine).
enum class FusedChoice { Auto, Fused, Unfused, Engine };

struct AllGatherMatmulArgs {
  const void* A;    // [M/W, K] shard
  const void* B;    // [K, N] (fcOpN) or [N, K] (fcOpT)
  void* C;          // [M, N]
  void* Agathered;  // [M, K] or NULL
  size_t M, N, K;
  fcOperation_t transB;
  fcDataType_t datatype;
  void* scratch;    // allGatherMatmulScratch bytes of the channel's scratch
  int smCount;      // SMs of the device (the engine's persistent grid)
  // The engine's GEMM starts only once every pull has landed (ranks sharing a GPU,
  // FC_SHARE_GPU: measured there, the pulls stall while the ranks' persistent GEMMs
  // spin on the time-sliced GPU; its waits then pass at once).
  bool engineAfterPulls = false;
  // Programmatic dependent launch (FC_PDL) for the unfused path's Lamport all-gather and
  // the engine's GEMM behind its entry barrier.
  bool pdl = true;
  int enginePieces = 1;  // the engine pulls each shard in this many pieces, each flagged (FC_AGMM_ENGINE_PIECES)
  // FC_AGMM_ENGINE_STAGES, timing only (wrong results when false): the engine's GEMM
  // waits for the flags; the remote shards are pulled.
  bool engineWaits = true, enginePulls = true;
};


// Tiles of 128 x 128 in a rows x N product.
inline size_t tiles128(size_t rows, size_t N) { return (rows + 127) / 128 * ((N + 127) / 128); }

// Overlapping communication with per-block GEMMs pays when every block's GEMM
// (shardRows x N) fills at least two waves of 128x128 tiles on a 132-SM GPU; below
// that the per-block GEMMs run partly empty and the unfused path is faster
// (measured: docs/perf-log.md).
bool overlapPays(size_t shardRows, size_t N);

// Bytes of scratch launchAllGatherMatmul needs: the gathered A when no Agathered is given.
size_t allGatherMatmulScratch(const DeviceComm& dc, const AllGatherMatmulArgs& a);

// C = allgather(A) x op(B); see fcAllGatherMatmul. symmetricA: where every rank's A
// lies in symmetric memory (zero-copy), or NULL.
fcResult_t launchAllGatherMatmul(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm,
                                 const AllGatherMatmulArgs& a, const SymSource* symmetricA,
                                 FusedChoice choice, cudaStream_t stream);

struct MatmulReduceScatterArgs {
  const void* A;  // [M, K]
  const void* B;  // [K, N] (fcOpN) or [N, K] (fcOpT)
  void* C;        // [M/W, N]
  size_t M, N, K;
  fcOperation_t transB;
  fcDataType_t datatype;
  void* scratch;  // matmulReduceScatterScratch bytes of the channel's scratch
  bool fp32Partials = false;  // partial products in fp32 (else in datatype)
  int smCount = 0;            // SMs of the device (the engine's persistent grid)
  // FC_MMRS_ENGINE_STAGES, timing only (wrong results when false): the engine path's
  // copy queue waits for each peer's tiles of our block (gates), then pulls the block.
  bool engineGates = true, enginePulls = true;
  // The engine's own tiles add the pulled partial in the GEMM's epilogue, waiting there
  // for it (FC_MMRS_ENGINE_STAGES=epilogue-add, at 2 ranks; not on ranks time-slicing a
  // GPU: FC_SHARE_GPU without FC_ENGINE_SMS).
  bool engineEpilogueAdd = false;
  int enginePieces = 4;  // FC_MMRS_ENGINE_PIECES (1 to kMaxPieces)
  // Whether fcReduceScatter would take its Lamport kernel for one block of partials
  // in the input type (comm.cc, chooseReduceScatter: the block within a push slot, at
  // most 4 ranks, FC_REDUCE_SCATTER_ALGO); small products then take the GEMM + that
  // kernel. pdl: its launch (FC_PDL).
  bool lamportReduceScatter = false, pdl = true;
};

// Bytes of scratch launchMatmulReduceScatter needs with `choice` (its partials).
size_t matmulReduceScatterScratch(const DeviceComm& dc, const MatmulReduceScatterArgs& a, FusedChoice choice);

// C = rows [rank*M/W, (rank+1)*M/W) of the sum over ranks of A x op(B); see
// fcMatmulReduceScatter.
fcResult_t launchMatmulReduceScatter(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm,
                                     const MatmulReduceScatterArgs& a, FusedChoice choice,
                                     cudaStream_t stream);

// fcMatmulAllReduce's decode path (gemv_all_reduce.cu): out = the sum over ranks of
// A [M, K] x B^T (B [N, K], an nn.Linear weight), GEMV and Lamport all-reduce in one
// kernel; out in datatype, or (fp32Out) the unrounded fp32 sums. gemvAllReduceFits says
// where it runs: bf16/fp16, fcOpT, 1 <= M <= kGemvAllReduceMaxRows, N and K multiples
// of 8, 16-byte aligned buffers, M x N within a Lamport push slot.
constexpr size_t kGemvAllReduceMaxRows = 4;
struct GemvAllReduceArgs {
  const void* A;
  const void* B;
  void* out;
  size_t M, N, K;
  fcOperation_t transB;
  fcDataType_t datatype;
  bool fp32Out;
};
bool gemvAllReduceFits(const DeviceComm& dc, const GemvAllReduceArgs& g);
// sig: the op signature the call headers compare; pdl: programmatic dependent launch.
fcResult_t launchGemvAllReduce(const DeviceComm& dc, int channel, const GemvAllReduceArgs& g, uint32_t sig, bool pdl,
                               cudaStream_t stream);

// Whether auto takes fcMatmulAllReduce's decode kernel where it fits (matmul_all_reduce.cc).
bool matmulAllReduceGemvPays(int nranks, size_t M, size_t N, size_t K);

// Whether auto runs fcMatmulAllReduce as fcMatmulReduceScatter's path then an
// all-gather (else the GEMM, then the all-reduce), the same on every rank: a function
// of the world size, the shape and the SMs the GEMM may use (matmul_all_reduce.cc).
bool matmulAllReduceSplitsRows(int nranks, size_t M, size_t N, size_t K, int smCount);

// Enqueue a one-thread kernel that waits (bounded: the communicator's deadline, abort,
// a peer's give-up) until *counter >= value, a word `producer` writes (tile_gate.cu);
// op and kind name the wait in the error record.
fcResult_t launchGate(const DeviceComm& dc, int channel, Op op, WaitKind kind, const uint32_t* counter,
                      uint32_t value, int producer, cudaStream_t stream);

// GEMM + reduce-scatter's gate, on the copy queue's stream: `producer` has stored every
// tile of our block (its counter reached `tiles`).
inline fcResult_t launchTileGate(const DeviceComm& dc, int channel, const uint32_t* counter, uint32_t tiles,
                                 int producer, cudaStream_t stream) {
  return launchGate(dc, channel, Op::MatmulReduceScatter, WaitKind::Tiles, counter, tiles, producer, stream);
}

// out[i] = round(own[i] + sum_j received[j * blockElems + i]), fp32 sums, i < n; the
// partials (own, received) in fp32 or in datatype.
fcResult_t launchReducePartials(const void* own, const void* received, size_t blockElems, int nreceived,
                                fcDataType_t partials, void* out, size_t n, fcDataType_t datatype,
                                cudaStream_t stream);

}  // namespace fc
