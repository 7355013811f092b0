// Shared by the copy-engine collectives: where the double-buffered slots of a
// channel's workspace lie on each rank, and how a transfer is enqueued.
//
// Why barriers and not the per-CTA ownership rule (chunks.cuh): a copy engine
// writes whole blocks regardless of which CTA "owns" a workspace chunk. So a
// copy-engine op meets every rank in a full barrier before its first transfer into
// a workspace that SM kernels use (every rank's earlier kernels have then finished
// entirely), and leaves nothing in flight into or out of a peer's workspace when it
// returns: either a final barrier (all-gather: peers read our workspace) or every
// peer's transfers into ours precede a barrier we passed (reduce-scatter).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/result.h"
#include "device/device_comm.h"

namespace fc::ce {

// The channel workspace is cut into kSlots slots; pass p uses slot p % kSlots, and
// the transfers of pass p + kSlots - 1 may start once barrier p has freed their
// slot everywhere. Two slots, i.e. passes as large as possible: on 4 x H200 every
// cudaMemcpyAsync of a pass costs a fixed ~8 us on top of its bytes (it starts only
// when the previous one has completed), so a 3-slot pipeline, whose smaller passes
// hide the barriers better, still measured 5-17 % slower (docs/perf-log.md).
// 256-byte granules keep every block 16-byte aligned for the vector loads.
constexpr int kSlots = 2;

inline size_t slotBytes(const DeviceComm& dc) { return dc.workspaceBytes / kSlots / 256 * 256; }

inline char* slot(const DeviceComm& dc, int rank, int channel, size_t pass) {
  return dc.base + size_t(rank) * dc.stride + channelWorkspaceOffset(dc, channel) +
         (pass % kSlots) * slotBytes(dc);
}

// One device-to-device transfer (local or peer memory: both are in our address
// space, so the driver picks a copy engine for it).
inline fcResult_t copy(void* to, const void* from, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return fcSuccess;
  FC_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream));
  return fcSuccess;
}

// `rows` runs of `bytes` each, `pitch` bytes apart in both buffers (a block of
// columns of a row-major matrix), as one transfer.
inline fcResult_t copy2D(void* to, const void* from, size_t pitch, size_t bytes, size_t rows, cudaStream_t stream) {
  if (bytes == 0 || rows == 0) return fcSuccess;
  FC_CUDA_CHECK(cudaMemcpy2DAsync(to, pitch, from, pitch, bytes, rows, cudaMemcpyDeviceToDevice, stream));
  return fcSuccess;
}

}  // namespace fc::ce
