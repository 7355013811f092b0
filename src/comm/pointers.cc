// Buffer argument checks (comm/pointers.h).
//
// No cache of validated ranges. The brief for this check (issue 24) allowed one, but
// the only ranges that could be cached safely are the fcMemAlloc buffers, which the
// communicator already knows exactly until fcMemFree: those are recognised from its
// own table (commSymmetricSource), without a driver call. For any other memory, a
// cached [base, base+size) from cudaPointerGetAttributes / cuMemGetAddressRange is
// unsafe: after cudaFree (or a caching allocator's release) the range would still be
// accepted, and the driver may hand the same virtual range to another device's
// allocation (unified addressing shares one address space between all GPUs), which
// would then be accepted as ours. Nothing tells the library that memory it did not
// allocate was freed; the driver's buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID) would,
// but asking for it costs the same call as the check itself. So every buffer that is
// not fcMemAlloc memory costs one driver lookup (cuPointerGetAttributes): a host-side
// search of the driver's allocation table, measured in docs/api.md (not a stream
// operation, no synchronisation), at most 4 per call (the fused ops' A, B, C, Agathered), next to
// the 5-10 us of an eager launch. Inside a CUDA graph it runs at capture only.
// FC_CHECK_POINTERS=0 skips it (docs/api.md).
#include "comm/pointers.h"

#include <cuda.h>


#include "comm/comm.h"
#include "core/driver.h"
#include "core/result.h"

namespace fc {

bool bufferFits(const void* p, size_t elems, size_t elemBytes) {
  if (elems > kMaxBufferBytes / elemBytes) return false;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  return a <= UINTPTR_MAX - elems * elemBytes;
}

namespace {

// `b` (non-NULL) is memory comm's GPU can address, else fcInvalidArgument saying what
// it is instead. One driver call for the three attributes it needs: the runtime's
// cudaPointerGetAttributes asks the driver for more and maps its answer (and turns an
// unknown pointer into an error to clear). cuPointerGetAttributes answers an unknown
// pointer with CUDA_SUCCESS and zero values.
fcResult_t checkBuffer(const fcComm* comm, const char* fn, const BufferArg& b) {
  SymSource src;
  if (commSymmetricSource(comm, b.ptr, 1, &src)) return fcSuccess;  // fcMemAlloc memory
  if (driverLoad() != fcSuccess)
    return setError(fcUnhandledCudaError, "%s: %s (%p) cannot be checked: the CUDA driver did not load", fn, b.name,
                    b.ptr);
  unsigned int memoryType = 0, isManaged = 0;
  int ordinal = -1;
  CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* data[3] = {&memoryType, &isManaged, &ordinal};
  const CUresult res = cu().cuPointerGetAttributes(3, attrs, data, reinterpret_cast<CUdeviceptr>(b.ptr));
  if (res != CUDA_SUCCESS) {
    const char* text = nullptr;
    cu().cuGetErrorString(res, &text);
    return setError(fcUnhandledCudaError, "%s: cuPointerGetAttributes(%s = %p) failed: %s", fn, b.name, b.ptr,
                    text ? text : "unknown error");
  }
  const int dev = comm->cudaDev;
  if (isManaged) return fcSuccess;  // addressable from every GPU; pages migrate on demand
  switch (memoryType) {
    case CU_MEMORYTYPE_DEVICE:
      if (ordinal == dev) return fcSuccess;
      // Refused even where peer access happens to be enabled: the library does not
      // enable or track it, and the ops' kernels and copies are meant for local memory.
      return setError(fcInvalidArgument,
                      "%s: %s (%p) is device memory of GPU %d, not of the communicator's GPU %d", fn, b.name,
                      b.ptr, ordinal, dev);
    case CU_MEMORYTYPE_UNIFIED:
      return fcSuccess;
    case CU_MEMORYTYPE_HOST:
      return setError(fcInvalidArgument,
                      "%s: %s (%p) is pinned host memory (cudaMallocHost / cudaHostAlloc / cudaHostRegister): "
                      "use device memory of the communicator's GPU %d",
                      fn, b.name, b.ptr, dev);
    default:
      return setError(fcInvalidArgument,
                      "%s: %s (%p) is host memory, or freed device memory (unknown to CUDA: not accessible "
                      "by the communicator's GPU %d)",
                      fn, b.name, b.ptr, dev);
  }
}

}  // namespace

fcResult_t checkBuffers(fcComm* comm, const char* fn, std::initializer_list<BufferArg> buffers) {
  // The comm's device (comm->cudaDev) is only known once a non-blocking init is done.
  FC_CHECK(commCheckAsync(comm));
  if (!comm->params.checkPointers) return fcSuccess;
  for (auto b = buffers.begin(); b != buffers.end(); ++b) {
    if (b->ptr == nullptr) continue;
    bool seen = false;  // in-place forms pass one buffer twice: one look is enough
    for (auto e = buffers.begin(); e != b && !seen; ++e) seen = e->ptr == b->ptr;
    if (!seen) FC_CHECK(checkBuffer(comm, fn, *b));
  }
  return fcSuccess;
}

}  // namespace fc
