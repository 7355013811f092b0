// Kernel launches through cudaLaunchKernel: its return value is this launch's
// error alone. (cudaGetLastError after a <<<>>> launch would also report, and
// clear, an unrelated earlier error of the caller's.)
#pragma once

#include <cuda_runtime_api.h>

#include <tuple>
#include <utility>

#include "core/result.h"

namespace fc {

template <typename... Params, typename... Args>
fcResult_t launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
                        Args&&... args) {
  // Convert each argument to the kernel's parameter type first, so that the
  // addresses handed to cudaLaunchKernel point at objects of exactly that type.
  auto params = std::tuple<Params...>(std::forward<Args>(args)...);
  void* ptrs[sizeof...(Params) > 0 ? sizeof...(Params) : 1];
  std::apply([&](auto&... p) {
    int i = 0;
    ((ptrs[i++] = static_cast<void*>(&p)), ...);
  }, params);
  FC_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, ptrs, 0, stream));
  return fcSuccess;
}

}  // namespace fc
