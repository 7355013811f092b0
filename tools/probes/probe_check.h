// The probes' call checks: print the call, file and line, and exit 1.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

// The same for a libfusedcomm call (the probes that link the library include
// fusedcomm.h first): the library's last error message.
#define FC_CK(x)                                                                                   \
  do {                                                                                             \
    const fcResult_t r_ = (x);                                                                     \
    if (r_ != fcSuccess) {                                                                         \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, fcGetLastError(nullptr));    \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

// A launch configuration of grid x block threads on `stream` with programmatic
// dependent launch (how the library's small kernels launch); `attr` must outlive it.
inline cudaLaunchConfig_t pdlLaunchConfig(dim3 grid, dim3 block, cudaStream_t stream, cudaLaunchAttribute* attr) {
  *attr = cudaLaunchAttribute{};
  attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr->val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// Exit 77 (skipped, as the test runners count it) where no CUDA GPU is visible.
inline void requireGpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("SKIP: no CUDA GPU here\n");
    std::exit(77);
  }
}
