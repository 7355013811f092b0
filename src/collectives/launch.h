// Kernel launches through cudaLaunchKernelExC: its return value is this launch's
// error alone. (cudaGetLastError after a <<<>>> launch would also report, and
// clear, an unrelated earlier error of the caller's.)
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

#include "core/result.h"

namespace fc {

template <typename... Params, typename... Args>
fcResult_t launchKernelEx(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, bool pdl,
                          Args&&... args);
template <typename... Params, typename... Args>
fcResult_t launchClusterKernelEx(void (*kernel)(Params...), dim3 grid, dim3 block, unsigned cluster,
                                 cudaStream_t stream, bool pdl, Args&&... args);

template <typename... Params, typename... Args>
fcResult_t launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
                        Args&&... args) {
  return launchKernelEx(kernel, grid, block, stream, false, std::forward<Args>(args)...);
}

// launchKernel with launch attributes (cudaLaunchKernelExC); pdl: with programmatic stream serialization
// (programmatic dependent launch), so that the kernel may start while the previous
// one on the stream finishes. Such a kernel must execute griddepcontrol.wait before
// it reads anything earlier work wrote (that wait returns at once without PDL).
// Captured into a CUDA graph, the dependency becomes a programmatic edge.
template <typename... Params, typename... Args>
fcResult_t launchKernelEx(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, bool pdl,
                          Args&&... args) {
  return launchClusterKernelEx(kernel, grid, block, 1u, stream, pdl, std::forward<Args>(args)...);
}

// The launch the forms above and below go through: launchKernelEx in thread block
// clusters of `cluster` CTAs along x (grid.x a multiple of it; 1: no cluster
// attribute), with `smem` bytes of dynamic shared memory.
template <typename... Params, typename... Args>
fcResult_t launchKernelWith(void (*kernel)(Params...), dim3 grid, dim3 block, unsigned cluster, size_t smem,
                            cudaStream_t stream, bool pdl, Args&&... args) {
  // Convert each argument to the kernel's parameter type first, so that the
  // addresses handed to the launch point at objects of exactly that type.
  auto params = std::tuple<Params...>(std::forward<Args>(args)...);
  void* ptrs[sizeof...(Params) > 0 ? sizeof...(Params) : 1];
  std::apply([&](auto&... p) {
    int i = 0;
    ((ptrs[i++] = static_cast<void*>(&p)), ...);
  }, params);
  cudaLaunchAttribute attrs[2]{};
  unsigned n = 0;
  if (pdl) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = cluster;
    attrs[n].val.clusterDim.y = 1;
    attrs[n++].val.clusterDim.z = 1;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = n ? attrs : nullptr;
  config.numAttrs = n;
  FC_CUDA_CHECK(cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(kernel), ptrs));
  return fcSuccess;
}

// launchKernelEx in thread block clusters of `cluster` CTAs along x.
template <typename... Params, typename... Args>
fcResult_t launchClusterKernelEx(void (*kernel)(Params...), dim3 grid, dim3 block, unsigned cluster,
                                 cudaStream_t stream, bool pdl, Args&&... args) {
  return launchKernelWith(kernel, grid, block, cluster, 0, stream, pdl, std::forward<Args>(args)...);
}

// launchKernelEx with `smem` bytes of dynamic shared memory: at most 48 KiB unless the
// kernel's cudaFuncAttributeMaxDynamicSharedMemorySize was raised (e.g. prepareGemvAllReduce).
template <typename... Params, typename... Args>
fcResult_t launchKernelExSmem(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                              bool pdl, Args&&... args) {
  return launchKernelWith(kernel, grid, block, 1u, smem, stream, pdl, std::forward<Args>(args)...);
}

// The clusters of `cluster` CTAs of `threads` threads (and `smem` bytes of dynamic shared
// memory) of `kernel` that the current device holds at once (cudaOccupancyMaxActiveClusters;
// at least 1; SIZE_MAX where the runtime gives no answer, i.e. no limit known). A
// cluster's CTAs must share a GPC, so a grid of clusters can fit the SMs and still not be
// resident at once: on an H200 31-32 clusters of four 544-thread CTAs (one an SM) were not,
// 30 were. A grid that asks for more runs its last clusters after the first ones leave; a
// Lamport kernel's late clusters then push only after the early ones' polls have waited for
// their peers' late clusters: two rounds (fcAllReduceResidualRMSNorm at 31-32 x 16384:
// 12.3-12.7 us against 7.9 at 30 rows; 2 H200s, forty-ninth session). Cached per (device,
// kernel, shape), residency.cc.
fcResult_t residentClustersOf(const void* kernel, unsigned cluster, unsigned threads, size_t smem, size_t* clusters);
template <typename... Params>
fcResult_t residentClusters(void (*kernel)(Params...), unsigned cluster, unsigned threads, size_t smem,
                            size_t* clusters) {
  return residentClustersOf(reinterpret_cast<const void*>(kernel), cluster, threads, smem, clusters);
}

// The dynamic shared memory that keeps a kernel to one CTA an SM on `device`: more than
// half an SM holds, unused by the kernel. Under PDL a grid launched early then waits for
// our CTAs to leave an SM instead of joining them (DeviceComm::soloSmemBytes keeps it).
inline fcResult_t soloSmemBytes(int device, uint32_t* bytes) {
  int perSm = 0;
  FC_CUDA_CHECK(cudaDeviceGetAttribute(&perSm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  *bytes = uint32_t(perSm) / 2 + 1024;
  return fcSuccess;
}

// Measurement forms (FC_LAMPORT_STAGES=solo, FC_ARNORM_STAGES=solo), per call: that
// much for `kernel` on the current device, set as its limit; *smem receives it.
template <typename... Params>
fcResult_t soloSmem(void (*kernel)(Params...), size_t* smem) {
  int device = 0;
  uint32_t bytes = 0;
  FC_CUDA_CHECK(cudaGetDevice(&device));
  FC_CHECK(soloSmemBytes(device, &bytes));
  FC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  *smem = bytes;
  return fcSuccess;
}

}  // namespace fc
