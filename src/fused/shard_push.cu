// All-gather + GEMM's shard pushes by SMs (FC_AGMM_ENGINE_PUSH=sm): our shard of A into
// every peer's workspace, piece by piece, each piece flagged in the peer's push flag
// for us exactly as the copy queue flags it (fused/allgather_matmul.cc, viaEnginePush:
// flag = the number of pieces landed), so that the engine's waits are the same.
//
// Why: the copy queue's pushes cost the engine's small-M calls an event hop in front
// and the copy engine's fixed latency per piece, and its 2-D copies (the pieces of K
// columns) evidently run as kernels that wait for SMs the persistent GEMM holds
// (design.md, "Small M"). This kernel runs in front of the GEMM on the caller's stream,
// on a few CTAs; with PDL the GEMM launches as soon as every push CTA has started, and
// a GEMM of one partial wave leaves them their SMs.
//
// How: every CTA stores its share of piece c to every peer (16-byte vectors), then
// counts itself done with c in our own counter word for c. The CTA that completes the
// count flags c to the peers with a release max of c + 1 (a max: the CTA completing
// piece c + 1 may flag before the one completing c, and a flag never goes back).
// Memory order: the CTA's threads' stores -> bar.sync -> its thread 0's system-scope
// fence and acq_rel add (cumulative over what the barrier ordered before it) -> the
// completing CTA's acquire of that count -> its fence and release max on the peer's
// flag -> the peer's acquire of the flag (device/sync.cuh) and its proxy fence before
// TMA reads the rows. Each CTA goes through the pieces in order, so the CTA completing
// the last piece knows every CTA is done with every counter word and puts them back to
// zero for the next call (which is stream-ordered after this kernel).
//
// No waits: a dead peer leaves nothing for this kernel to wait for (the GEMM's waits
// are the bounded ones). The peers' workspaces are free once the op's entry barrier,
// the kernel before this one, has completed: griddepcontrol.wait, after letting the
// GEMM launch.
#include <cuda_runtime.h>

#include "collectives/launch.h"
#include "core/preload.h"
#include "core/result.h"
#include "device/device_comm.h"
#include "device/pdl.cuh"
#include "fused/shard_push.h"

namespace fc {
namespace {

constexpr unsigned kPushThreads = 512;
constexpr int kLoadsInFlight = 4;  // 16-byte loads a thread issues before its stores

__device__ __forceinline__ uint32_t addAcqRelSys(uint32_t* word, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.sys.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(word), "r"(v) : "memory");
  return old;
}

__device__ __forceinline__ void maxReleaseSys(uint32_t* word, uint32_t v) {
  asm volatile("red.release.sys.global.max.u32 [%0], %1;" ::"l"(word), "r"(v) : "memory");
}

__global__ void __launch_bounds__(kPushThreads) shardPushKernel(DeviceComm dc, int channel, ShardPush p) {
  dev::allowDependentLaunch();  // the GEMM needs nothing of ours but the flags
  dev::waitForPreviousGrid();   // the entry barrier: every peer's workspace is free
  uint32_t* counters =
      reinterpret_cast<uint32_t*>(dc.base + size_t(dc.rank) * dc.stride + kPushCountersOffset) +
      size_t(channel) * kMaxPushPieces;
  for (int c = 0; c < p.pieces; ++c) {
    const ShardPiece q = pieceOf(p, c);
    const size_t rowVecs = q.bytes / 16, vecs = q.rows * rowVecs, stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i0 = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i0 < vecs; i0 += kLoadsInFlight * stride) {
      uint4 v[kLoadsInFlight];
      size_t off[kLoadsInFlight];
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u) {
        const size_t i = i0 + size_t(u) * stride;
        off[u] = i < vecs ? (q.row0 + i / rowVecs) * p.rowBytes + q.byte0 + (i % rowVecs) * 16 : 0;
        if (i < vecs) v[u] = __ldg(reinterpret_cast<const uint4*>(p.src + off[u]));
      }
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u)
        if (i0 + size_t(u) * stride < vecs)
          for (int t = 0; t < p.npeers; ++t) *reinterpret_cast<uint4*>(p.dst[t] + off[u]) = v[u];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence_system();
      if (addAcqRelSys(counters + c, 1) == gridDim.x - 1) {  // the last CTA done with piece c
        __threadfence_system();
        for (int t = 0; t < p.npeers; ++t) maxReleaseSys(p.flag[t], uint32_t(c + 1));
        if (c == p.pieces - 1)
          for (int k = 0; k < p.pieces; ++k) counters[k] = 0;
      }
    }
  }
}

}  // namespace

FC_PRELOAD_MODULE_OF(shardPushKernel);

fcResult_t launchShardPush(const DeviceComm& dc, int channel, const ShardPush& p, bool pdl, cudaStream_t stream) {
  if (p.pieces < 1 || p.pieces > kMaxPushPieces || p.npeers < 1 || p.npeers > kMaxRanks - 1 || p.rowBytes % 16 != 0 ||
      (p.byColumns && p.pieceBytes % 16 != 0))
    return setError(fcInternalError, "the shard push's pieces (%d) or rows (%zu bytes) do not fit its kernel",
                    p.pieces, p.rowBytes);
  return launchKernelEx(shardPushKernel, dim3(unsigned(p.ctas)), dim3(kPushThreads), stream, pdl, dc, channel, p);
}

}  // namespace fc
