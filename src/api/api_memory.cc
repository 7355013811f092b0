// Symmetric memory entry points: fcMemAlloc (collective), fcMemFree (local).
#include "api/api.h"
#include "comm/pointers.h"

FC_API fcResult_t fcMemAlloc(fcComm_t comm, void** ptr, size_t bytes) {
  fc::clearError();
  FC_CHECK(fc::checkComm(comm, "fcMemAlloc"));
  if (ptr == nullptr) return fc::setError(fcInvalidArgument, "fcMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (bytes == 0) return fc::setError(fcInvalidArgument, "fcMemAlloc: bytes is 0");
  // Rounding a larger size up to the allocation granularity could wrap to a small one.
  if (bytes > fc::kMaxBufferBytes)
    return fc::setError(fcInvalidArgument, "fcMemAlloc: bytes %zu is too large (over 2^48)", bytes);
  FC_CHECK(fc::commCheckAsync(comm));
  int dev = -1;
  FC_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev != comm->cudaDev)
    return fc::setError(fcInvalidUsage, "fcMemAlloc: current device is %d, the communicator's is %d",
                        dev, comm->cudaDev);
  fcResult_t res = fc::commMemAlloc(comm, bytes, ptr);
  if (res != fcSuccess) fc::addContext(res, "fcMemAlloc(%zu bytes)", bytes);
  return res;
}

FC_API fcResult_t fcMemFree(fcComm_t comm, void* ptr) {
  fc::clearError();
  FC_CHECK(fc::checkComm(comm, "fcMemFree"));
  if (ptr == nullptr) return fc::setError(fcInvalidArgument, "fcMemFree: ptr is NULL");
  return fc::commMemFree(comm, ptr);
}
