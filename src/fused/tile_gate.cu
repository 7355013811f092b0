// The GEMM + reduce-scatter engine's gate: one thread waits, with the library's
// deadline and error record, until a peer has stored every tile of our block (its
// tile counter in our memory, tile_signal_epilogue.cuh), so that the copy after it on
// the copy queue pulls a complete block. A kernel, not cuStreamWaitValue32: a stream
// wait has no deadline, and a dead peer would hang the stream.
#include "collectives/launch.h"
#include "core/preload.h"
#include "core/result.h"
#include "device/sync.cuh"
#include "fused/fused.h"

namespace fc {
namespace {

// The writers are the peer's epilogue threads, over NVLink (release adds at system
// scope). On a give-up the error is recorded and the op reports it.
__global__ void tileGateKernel(DeviceComm dc, int channel, const uint32_t* counter, uint32_t tiles, int producer) {
  if (threadIdx.x == 0)
    dev::waitAtLeast(dc, Op::MatmulReduceScatter, counter, tiles, producer, channel, WaitKind::Tiles);
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(tileGateKernel);

fcResult_t launchTileGate(const DeviceComm& dc, int channel, const uint32_t* counter, uint32_t tiles, int producer,
                          cudaStream_t stream) {
  return launchKernel(tileGateKernel, dim3(1), dim3(32), stream, dc, channel, counter, tiles, producer);
}

}  // namespace fc
