// The GEMM + reduce-scatter engine's gate: one thread waits, with the library's
// deadline and error record, until a peer has stored every tile of our block (its
// tile counter in our memory, tile_signal_epilogue.cuh), so that the copy after it on
// the copy queue pulls a complete block. A kernel, not cuStreamWaitValue32: a stream
// wait has no deadline, and a dead peer would hang the stream.
#include "collectives/launch.h"
#include "core/result.h"
#include "device/sync.cuh"
#include "fused/fused.h"

namespace fc {
namespace {

__global__ void tileGateKernel(DeviceComm dc, int channel, const uint32_t* counter, uint32_t tiles, int producer) {
  if (threadIdx.x != 0) return;
  // After a give-up (ours or another CTA's) nothing waits any more: the op reports it.
  if (dev::loadVolatile(dev::errorGuard(dc)) != 0u) return;
  dev::WaitExits exits;
  for (uint32_t spin = 1;; ++spin) {
    uint32_t v;
    // System scope: the writers are the peer's epilogue threads, over NVLink.
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
    if (v >= tiles) return;
    __nanosleep(256);
    if ((spin & 1023u) == 0u &&
        exits.giveUp(dc, Op::MatmulReduceScatter, producer, channel, tiles, v, WaitKind::Tiles))
      return;
  }
}

}  // namespace

fcResult_t launchTileGate(const DeviceComm& dc, int channel, const uint32_t* counter, uint32_t tiles, int producer,
                          cudaStream_t stream) {
  return launchKernel(tileGateKernel, dim3(1), dim3(32), stream, dc, channel, counter, tiles, producer);
}

}  // namespace fc
