#include "memory/symmetric_heap.h"

#include <unistd.h>

#include <cstdint>

#include "core/driver.h"
#include "core/log.h"
#include "core/result.h"

namespace fc {

fcResult_t SymmetricHeap::create(Bootstrap& bootstrap, CUdevice cuDev, size_t bytes,
                                 const std::function<fcResult_t(void*, size_t)>& initLocal,
                                 std::unique_ptr<SymmetricHeap>* out) {
  const int rank = bootstrap.rank(), nranks = bootstrap.nranks();
  std::unique_ptr<SymmetricHeap> h(new SymmetricHeap(rank, nranks));
  h->mapped_.assign(size_t(nranks), false);

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cuDev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  FC_CU_CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  h->stride_ = (bytes + gran - 1) / gran * gran;
  h->reserved_ = h->stride_ * size_t(nranks);

  // Every rank must agree on the stride, or base + peer*stride points into the void.
  std::vector<uint64_t> strides(static_cast<size_t>(nranks));
  uint64_t mine = h->stride_;
  FC_CHECK(bootstrap.allGather(&mine, strides.data(), sizeof mine));
  for (int r = 0; r < nranks; ++r)
    if (strides[size_t(r)] != mine)
      return setError(fcInvalidUsage,
                      "symmetric allocation: rank %d asks for %llu bytes, this rank (%d) for %llu: "
                      "every rank must allocate the same size",
                      r, (unsigned long long)strides[size_t(r)], rank, (unsigned long long)mine);

  FC_CU_CHECK(cuMemAddressReserve(&h->base_, h->reserved_, gran, 0, 0));
  FC_CU_CHECK(cuMemCreate(&h->handles_[size_t(rank)], h->stride_, &prop, 0));
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = cuDev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  FC_CU_CHECK(cuMemMap(h->base_ + size_t(rank) * h->stride_, h->stride_, 0,
                       h->handles_[size_t(rank)], 0));
  h->mapped_[size_t(rank)] = true;
  FC_CU_CHECK(cuMemSetAccess(h->base_ + size_t(rank) * h->stride_, h->stride_, &access, 1));
  if (initLocal) FC_CHECK(initLocal(h->local(), h->stride_));

  int myFd = -1;
  FC_CU_CHECK(cuMemExportToShareableHandle(&myFd, h->handles_[size_t(rank)],
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  std::vector<int> fds(size_t(nranks), -1);
  fcResult_t res = bootstrap.allGatherFds(&myFd, 1, fds.data());
  close(myFd);
  FC_CHECK(res);

  // Import and map every peer; close each fd as soon as it is imported (the handle
  // keeps the memory alive), and close the rest if anything fails on the way.
  for (int r = 0; r < nranks && res == fcSuccess; ++r) {
    if (r == rank) continue;
    CUresult cr = cu().cuMemImportFromShareableHandle(
        &h->handles_[size_t(r)], reinterpret_cast<void*>(static_cast<uintptr_t>(fds[size_t(r)])),
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fds[size_t(r)]);
    fds[size_t(r)] = -1;
    if (cr != CUDA_SUCCESS) {
      h->handles_[size_t(r)] = 0;
      res = cuError(cr, "cuMemImportFromShareableHandle", __FILE__, __LINE__);
      break;
    }
    cr = cu().cuMemMap(h->base_ + size_t(r) * h->stride_, h->stride_, 0, h->handles_[size_t(r)], 0);
    if (cr != CUDA_SUCCESS) {
      res = cuError(cr, "cuMemMap(peer)", __FILE__, __LINE__);
      break;
    }
    h->mapped_[size_t(r)] = true;
    cr = cu().cuMemSetAccess(h->base_ + size_t(r) * h->stride_, h->stride_, &access, 1);
    if (cr != CUDA_SUCCESS)
      res = addContext(cuError(cr, "cuMemSetAccess(peer)", __FILE__, __LINE__),
                       "mapping rank %d's memory (are the GPUs peer-capable over NVLink?)", r);
  }
  for (int fd : fds)
    if (fd >= 0) close(fd);
  FC_CHECK(res);
  FC_INFO("symmetric heap: %d x %zu bytes at %p (granularity %zu)", nranks, h->stride_,
          (void*)h->base_, gran);
  *out = std::move(h);
  return fcSuccess;
}

bool SymmetricHeap::containsLocal(const void* p, size_t bytes) const {
  uintptr_t a = reinterpret_cast<uintptr_t>(p), lo = reinterpret_cast<uintptr_t>(local());
  return a >= lo && bytes <= stride_ && a - lo <= stride_ - bytes;
}

SymmetricHeap::~SymmetricHeap() {
  if (release() != fcSuccess) log(LogLevel::Warn, "symmetric heap release: %s", lastError());
}

fcResult_t SymmetricHeap::release() {
  // Keep going on failure: free as much as possible, report the first error.
  fcResult_t first = fcSuccess;
  auto note = [&](CUresult cr, const char* what) {
    if (cr != CUDA_SUCCESS && first == fcSuccess) first = cuError(cr, what, __FILE__, __LINE__);
  };
  for (int r = 0; r < nranks_; ++r) {
    if (mapped_.size() > size_t(r) && mapped_[size_t(r)])
      note(cu().cuMemUnmap(base_ + size_t(r) * stride_, stride_), "cuMemUnmap");
    if (handles_[size_t(r)] != 0) note(cu().cuMemRelease(handles_[size_t(r)]), "cuMemRelease");
  }
  if (base_ != 0) note(cu().cuMemAddressFree(base_, reserved_), "cuMemAddressFree");
  base_ = 0;
  return first;
}

}  // namespace fc
