// CUDA driver API entry points, fetched through cudart at run time
// (cudaGetDriverEntryPointByVersion) so that libfusedcomm never links libcuda and
// loads on machines without a GPU driver. Same approach as NCCL's cudawrap.cc.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "fusedcomm.h"

namespace fc {

struct DriverApi {
  PFN_cuGetErrorString_v6000 cuGetErrorString;
  PFN_cuDeviceGet_v2000 cuDeviceGet;
  PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute;
  PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity;
  PFN_cuMemCreate_v10020 cuMemCreate;
  PFN_cuMemRelease_v10020 cuMemRelease;
  PFN_cuMemExportToShareableHandle_v10020 cuMemExportToShareableHandle;
  PFN_cuMemImportFromShareableHandle_v10020 cuMemImportFromShareableHandle;
  PFN_cuMemAddressReserve_v10020 cuMemAddressReserve;
  PFN_cuMemAddressFree_v10020 cuMemAddressFree;
  PFN_cuMemMap_v10020 cuMemMap;
  PFN_cuMemUnmap_v10020 cuMemUnmap;
  PFN_cuMemSetAccess_v10020 cuMemSetAccess;
  PFN_cuStreamWriteValue32_v11070 cuStreamWriteValue32;
  PFN_cuPointerGetAttributes_v7000 cuPointerGetAttributes;
};

// The driver's entry point `name` at the ABI of `version` (cudaGetDriverEntryPointByVersion),
// or NULL when this driver lacks it (*err, when given: the runtime's error, if any).
void* driverEntryPoint(const char* name, unsigned version, cudaError_t* err = nullptr);

// Load the entry points once (thread-safe). Without a driver or GPU this returns
// fcUnhandledCudaError with a message that says so.
fcResult_t driverLoad();

// The loaded table; valid after driverLoad() returned fcSuccess.
const DriverApi& cu();

// Turn a CUresult into an fcResult_t with a message naming `what`.
fcResult_t cuError(CUresult res, const char* what, const char* file, int line);

}  // namespace fc

#define FC_CU_CHECK(call)                                                        \
  do {                                                                           \
    CUresult fc_cu_ = (::fc::cu().call);                                         \
    if (fc_cu_ != CUDA_SUCCESS) return ::fc::cuError(fc_cu_, #call, __FILE__, __LINE__); \
  } while (0)
