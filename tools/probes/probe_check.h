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
