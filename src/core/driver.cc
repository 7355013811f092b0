#include "core/driver.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <mutex>

#include "core/result.h"

namespace fc {
namespace {

DriverApi table;
fcResult_t loadResult = fcInternalError;
char loadMessage[512];
std::once_flag loadOnce;

// The driver version each entry point's ABI was introduced in: asking for exactly
// that version keeps the PFN typedef above correct even on newer drivers.
template <typename F>
bool load(F* fn, const char* name, unsigned version) {
  cudaError_t err = cudaSuccess;
  void* p = driverEntryPoint(name, version, &err);
  if (p == nullptr) {
    snprintf(loadMessage, sizeof loadMessage,
             "CUDA driver entry point %s (v%u) unavailable: %s", name, version,
             err != cudaSuccess ? cudaGetErrorString(err) : "symbol not found in the driver");
    return false;
  }
  *fn = reinterpret_cast<F>(p);
  return true;
}

void loadAll() {
  // cudaDriverGetVersion reports 0 when no driver is installed; it is the clearest
  // place to say "no driver" rather than failing later on a symbol lookup.
  int driverVersion = 0;
  cudaError_t err = cudaDriverGetVersion(&driverVersion);
  if (err != cudaSuccess || driverVersion == 0) {
    snprintf(loadMessage, sizeof loadMessage,
             "no CUDA driver found (libcuda.so.1 is not installed or not loadable): "
             "libfusedcomm needs an NVIDIA GPU and driver to create a communicator");
    loadResult = fcUnhandledCudaError;
    return;
  }
  bool ok = load(&table.cuGetErrorString, "cuGetErrorString", 6000) &&
            load(&table.cuDeviceGet, "cuDeviceGet", 2000) &&
            load(&table.cuDeviceGetAttribute, "cuDeviceGetAttribute", 2000) &&
            load(&table.cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", 10020) &&
            load(&table.cuMemCreate, "cuMemCreate", 10020) &&
            load(&table.cuMemRelease, "cuMemRelease", 10020) &&
            load(&table.cuMemExportToShareableHandle, "cuMemExportToShareableHandle", 10020) &&
            load(&table.cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle", 10020) &&
            load(&table.cuMemAddressReserve, "cuMemAddressReserve", 10020) &&
            load(&table.cuMemAddressFree, "cuMemAddressFree", 10020) &&
            load(&table.cuMemMap, "cuMemMap", 10020) &&
            load(&table.cuMemUnmap, "cuMemUnmap", 10020) &&
            load(&table.cuMemSetAccess, "cuMemSetAccess", 10020) &&
            load(&table.cuStreamWriteValue32, "cuStreamWriteValue32", 11070) &&
            load(&table.cuPointerGetAttributes, "cuPointerGetAttributes", 7000);
  loadResult = ok ? fcSuccess : fcUnhandledCudaError;
}

}  // namespace

void* driverEntryPoint(const char* name, unsigned version, cudaError_t* err) {
  cudaDriverEntryPointQueryResult q;
  void* p = nullptr;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &q);
  if (err != nullptr) *err = e;
  return e == cudaSuccess && q == cudaDriverEntryPointSuccess ? p : nullptr;
}

fcResult_t driverLoad() {
  std::call_once(loadOnce, loadAll);
  if (loadResult != fcSuccess) return setError(loadResult, "%s", loadMessage);
  return fcSuccess;
}

const DriverApi& cu() { return table; }

fcResult_t cuError(CUresult res, const char* what, const char* file, int line) {
  const char* s = nullptr;
  if (table.cuGetErrorString) table.cuGetErrorString(res, &s);
  return setError(res == CUDA_ERROR_NOT_SUPPORTED ? fcNotSupported : fcUnhandledCudaError,
                  "%s:%d: %s failed: CUresult %d (%s)", file, line, what, (int)res,
                  s ? s : "unknown");
}

}  // namespace fc
