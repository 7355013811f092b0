// Symmetric memory: one cuMem allocation per rank, all of the same size, mapped
// by every rank into one reserved VA range at base + r*stride (as NCCL's
// dev_runtime does), so that a peer's address is base + peer*stride + offset:
// one multiply-add on the device instead of a table lookup.
//
// Creation is collective over the bootstrap: each rank cuMemCreate's its
// allocation (POSIX-fd shareable), maps it and runs `initLocal` on it (e.g. zeroing
// signal pads) BEFORE anybody else can map it, then exports the fd; rank 0 relays
// all fds; each rank imports and maps every peer's allocation and grants its own
// device read/write access to the whole range.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "fusedcomm.h"

namespace fc {

class SymmetricHeap {
 public:
  // Collective. `bytes` must be the same on every rank; it is rounded up to the
  // device's recommended allocation granularity. `cuDev` is the local device.
  // `initLocal(ptr, bytes)` runs on the local mapping before it is exported.
  static fcResult_t create(Bootstrap& bootstrap, CUdevice cuDev, size_t bytes,
                           const std::function<fcResult_t(void*, size_t)>& initLocal,
                           std::unique_ptr<SymmetricHeap>* out);
  ~SymmetricHeap();  // unmaps everything and releases every handle (local, no peers needed)
  SymmetricHeap(const SymmetricHeap&) = delete;
  SymmetricHeap& operator=(const SymmetricHeap&) = delete;

  char* base() const { return reinterpret_cast<char*>(base_); }
  size_t stride() const { return stride_; }
  char* local() const { return peer(rank_); }
  char* peer(int r) const { return base() + size_t(r) * stride_; }
  // True if [p, p+bytes) lies inside this rank's own allocation.
  bool containsLocal(const void* p, size_t bytes) const;

 private:
  SymmetricHeap(int rank, int nranks) : rank_(rank), nranks_(nranks), handles_(size_t(nranks), 0) {}
  fcResult_t release();

  int rank_;
  int nranks_;
  CUdeviceptr base_ = 0;
  size_t stride_ = 0;
  size_t reserved_ = 0;
  std::vector<CUmemGenericAllocationHandle> handles_;  // 0 = none
  std::vector<bool> mapped_;
};

}  // namespace fc
