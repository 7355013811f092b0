// fcBarrier: one CTA meets the same CTA of every rank on the stream's channel.
// Work enqueued after it starts only once every rank's earlier work on its stream
// has finished (kernel boundaries order it before our release store).
#include "collectives/collectives.h"
#include "collectives/launch.h"
#include "core/result.h"
#include "device/sync.cuh"

namespace fc {
namespace {

__global__ void barrierKernel(DeviceComm dc, int channel) {
  // CTA 0's epoch of the channel: shared with CTA 0 of the other collectives,
  // which is fine because every rank issues the same sequence on a channel.
  uint32_t* epochPtr = dev::epochAddr(dc, channel, 0);
  const uint32_t epoch = *epochPtr;
  if (!dev::barrierBlock(dc, Op::Barrier, opSignature(Op::Barrier, 0, 0), channel, epoch + 1)) return;
  if (threadIdx.x == 0) *epochPtr = epoch + 1;
}

}  // namespace

fcResult_t launchBarrier(const DeviceComm& dc, int channel, cudaStream_t stream) {
  // 32 threads >= kMaxRanks signalling threads.
  return launchKernel(barrierKernel, dim3(1), dim3(32), stream, dc, channel);
}

}  // namespace fc
