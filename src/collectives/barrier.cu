// Barrier kernels: one CTA meets the same CTA of every rank on the stream's channel.
// Work enqueued after one starts only once every rank's earlier work on its stream
// has finished (kernel and copy boundaries order it before our release store).
// fcBarrier uses it directly; the copy-engine collectives put one between their
// transfers, with their own op signature so that mismatched calls are caught.
#include "collectives/collectives.h"
#include "collectives/launch.h"
#include "core/preload.h"
#include "core/result.h"
#include "device/pdl.cuh"
#include "device/sync.cuh"

namespace fc {
namespace {

// letNextStart: the next kernel on the stream, if launched with programmatic stream
// serialization, may start at once (the GEMM engines', whose first tiles need nothing
// from the peers: the all-gather engine never waits for this grid, so nothing it reads
// may come from here; fcMatmulAllReduce's waits for it before its first store into the
// peer). clear: words zeroed before this rank arrives (the GEMM + reduce-scatter
// engine's tile counters, which the peers count on again only after the next call's
// entry barrier, i.e. after this grid has ended): one launch less than a memset.
// met: where asked, this rank's outcome (barrierMetOf): 1 when the barrier passed and
// neither this rank nor a peer had given up. A peer that gave up earlier runs on without
// waiting, so its flag may already show a later epoch and let the barrier pass; its
// give-up wrote our peer-abort word before that flag (its release store), which we
// acquired, so the check below sees it.
__global__ void barrierKernel(DeviceComm dc, int channel, Op op, uint32_t sig, bool letNextStart, uint32_t* clear,
                              int clearWords, uint32_t* met) {
  if (letNextStart) dev::allowDependentLaunch();
  for (int i = int(threadIdx.x); i < clearWords; i += int(blockDim.x)) clear[i] = 0;
  // CTA 0's epoch of the channel: shared with CTA 0 of the other collectives,
  // which is fine because every rank issues the same sequence on a channel.
  uint32_t* epochPtr = dev::epochAddr(dc, channel, 0);
  const uint32_t epoch = *epochPtr;
  const bool passed = dev::barrierBlock(dc, op, sig, channel, epoch + 1);
  if (threadIdx.x != 0) return;
  if (met != nullptr)
    *met = passed && dev::loadVolatile(dev::errorGuard(dc)) == 0u &&
                   dev::loadVolatile(dev::peerAbortWord(dc, dc.rank)) == 0u
               ? 1u
               : 0u;
  if (passed) *epochPtr = epoch + 1;
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(barrierKernel);

fcResult_t launchBarrier(const DeviceComm& dc, int channel, cudaStream_t stream) {
  return launchOpBarrier(dc, channel, Op::Barrier, opSignature(Op::Barrier, 0, 0), stream);
}

fcResult_t launchOpBarrier(const DeviceComm& dc, int channel, Op op, uint32_t sig, cudaStream_t stream,
                           bool letNextStart, uint32_t* clear, int clearWords, bool recordMet) {
  // 32 threads >= kMaxRanks signalling threads.
  return launchKernel(barrierKernel, dim3(1), dim3(32), stream, dc, channel, op, sig, letNextStart, clear,
                      clearWords, recordMet ? barrierMetOf(dc, channel) : nullptr);
}

}  // namespace fc
