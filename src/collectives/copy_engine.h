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

// Each half of the channel workspace is one slot; passes alternate between them.
// 256-byte granules keep every block 16-byte aligned for the vector loads.
inline size_t slotBytes(const DeviceComm& dc) { return dc.workspaceBytes / 2 / 256 * 256; }

inline char* slot(const DeviceComm& dc, int rank, int channel, size_t pass) {
  return dc.base + size_t(rank) * dc.stride + dc.workspaceOffset + size_t(channel) * dc.workspaceBytes +
         (pass % 2) * slotBytes(dc);
}

// One device-to-device transfer (local or peer memory: both are in our address
// space, so the driver picks a copy engine for it).
inline fcResult_t copy(void* to, const void* from, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return fcSuccess;
  FC_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream));
  return fcSuccess;
}

}  // namespace fc::ce
