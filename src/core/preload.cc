#include "core/preload.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "core/driver.h"
#include "core/log.h"
#include "core/result.h"

namespace fc {
namespace {

// Function-local statics: registration runs from other units' static initialisers,
// in an order C++ leaves unspecified.
std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
std::vector<const void*>& registry() {
  static std::vector<const void*> anchors;
  return anchors;
}

struct LoaderApi {
  PFN_cuKernelGetLibrary_v12050 cuKernelGetLibrary = nullptr;
  PFN_cuLibraryGetKernelCount_v12040 cuLibraryGetKernelCount = nullptr;
  PFN_cuLibraryEnumerateKernels_v12040 cuLibraryEnumerateKernels = nullptr;
  PFN_cuKernelGetFunction_v12000 cuKernelGetFunction = nullptr;
  PFN_cuFuncIsLoaded_v12040 cuFuncIsLoaded = nullptr;
  PFN_cuFuncLoad_v12040 cuFuncLoad = nullptr;
  bool ok = false;
};

template <typename F>
bool entry(F* fn, const char* name, unsigned version) {
  *fn = reinterpret_cast<F>(driverEntryPoint(name, version));
  return *fn != nullptr;
}

const LoaderApi& loader() {
  static const LoaderApi api = [] {
    LoaderApi a;
    a.ok = entry(&a.cuKernelGetLibrary, "cuKernelGetLibrary", 12050) &&
           entry(&a.cuLibraryGetKernelCount, "cuLibraryGetKernelCount", 12040) &&
           entry(&a.cuLibraryEnumerateKernels, "cuLibraryEnumerateKernels", 12040) &&
           entry(&a.cuKernelGetFunction, "cuKernelGetFunction", 12000) &&
           entry(&a.cuFuncIsLoaded, "cuFuncIsLoaded", 12040) && entry(&a.cuFuncLoad, "cuFuncLoad", 12040);
    return a;
  }();
  return api;
}

}  // namespace

bool registerKernelModule(const void* kernel) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().push_back(kernel);
  return true;
}

fcResult_t preloadKernels() {
  const LoaderApi& api = loader();
  if (!api.ok) {
    FC_INFO("this CUDA driver cannot enumerate a library's kernels (needs 12.5): kernels load lazily");
    return fcSuccess;
  }
  std::vector<const void*> anchors;
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    anchors = registry();
  }
  std::vector<CUlibrary> seen;
  int total = 0;
  for (const void* anchor : anchors) {
    cudaKernel_t kernel = nullptr;
    cudaError_t err = cudaGetKernel(&kernel, anchor);
    if (err != cudaSuccess) return setError(fcUnhandledCudaError, "cudaGetKernel: %s", cudaGetErrorString(err));
    CUlibrary lib = nullptr;
    CUresult res = api.cuKernelGetLibrary(&lib, reinterpret_cast<CUkernel>(kernel));
    if (res != CUDA_SUCCESS) return setError(fcUnhandledCudaError, "cuKernelGetLibrary: CUresult %d", int(res));
    if (std::find(seen.begin(), seen.end(), lib) != seen.end()) continue;  // two anchors, one unit
    seen.push_back(lib);
    unsigned count = 0;
    res = api.cuLibraryGetKernelCount(&count, lib);
    std::vector<CUkernel> kernels(count);
    if (res == CUDA_SUCCESS && count > 0) res = api.cuLibraryEnumerateKernels(kernels.data(), count, lib);
    for (unsigned i = 0; i < count && res == CUDA_SUCCESS; ++i, ++total) {
      // The kernel's function in the current context (measured on 2 H200s: getting it
      // loads it already), then loaded if it is not (cuFuncLoad; a no-op otherwise).
      CUfunction fn = nullptr;
      CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
      res = api.cuKernelGetFunction(&fn, kernels[i]);
      if (res == CUDA_SUCCESS) res = api.cuFuncIsLoaded(&state, fn);
      if (res == CUDA_SUCCESS && state != CU_FUNCTION_LOADING_STATE_LOADED) res = api.cuFuncLoad(fn);
    }
    if (res != CUDA_SUCCESS)
      return setError(fcUnhandledCudaError, "loading libfusedcomm's kernels: CUresult %d", int(res));
  }
  FC_INFO("kernels: all %d of libfusedcomm's %zu units are loaded in this context", total, seen.size());
  return fcSuccess;
}

}  // namespace fc
