#include "comm/scratch.h"

#include <cuda_runtime_api.h>

#include "core/log.h"
#include "core/result.h"

namespace fc {

Scratch::~Scratch() {
  for (void* p : bufs_) cudaFree(p);
}

fcResult_t Scratch::grow(size_t bytes) {
  if (bytes <= bytes_) return fcSuccess;
  size_t n = size_t(2) << 20;  // the allocation granularity
  while (n < bytes) n *= 2;
  void* p = nullptr;
  FC_CUDA_CHECK(cudaMalloc(&p, n));
  bufs_.push_back(p);
  FC_INFO("scratch grows from %zu to %zu bytes (%zu allocated in all)", bytes_, n, allocated_ + n);
  bytes_ = n;
  allocated_ += n;
  return fcSuccess;
}

}  // namespace fc
