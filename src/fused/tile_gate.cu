// The fused ops' gate: one thread waits, with the library's deadline and error record,
// until a word in our memory that a peer writes reaches a value. GEMM + reduce-scatter:
// the peer has stored every tile of our block (its tile counter,
// tile_signal_epilogue.cuh), so that the copy after it on the copy queue pulls a
// complete block. All-gather + GEMM on ranks sharing a GPU: every peer's shard has
// landed before the GEMM starts. A kernel, not cuStreamWaitValue32: a stream wait has
// no deadline, and a dead peer would hang the stream.
#include "collectives/launch.h"
#include "core/preload.h"
#include "core/result.h"
#include "device/sync.cuh"
#include "fused/fused.h"

namespace fc {
namespace {

// The writers are the peer's epilogue threads or copy engine, over NVLink (release
// adds at system scope, or stream writes after a memory barrier). On a give-up the
// error is recorded and the op reports it.
__global__ void gateKernel(DeviceComm dc, int channel, Op op, WaitKind kind, const uint32_t* counter, uint32_t value,
                           int producer) {
  if (threadIdx.x == 0) dev::waitAtLeast(dc, op, counter, value, producer, channel, kind);
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(gateKernel);

fcResult_t launchGate(const DeviceComm& dc, int channel, Op op, WaitKind kind, const uint32_t* counter,
                      uint32_t value, int producer, cudaStream_t stream) {
  return launchKernel(gateKernel, dim3(1), dim3(32), stream, dc, channel, op, kind, counter, value, producer);
}

}  // namespace fc
