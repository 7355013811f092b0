// Result handling shared by every layer: the thread-local last-error message and
// the macros that turn a failed CUDA / driver / OS call into an fcResult_t.
#pragma once

#include <cerrno>
#include <cstring>

#include <cuda_runtime_api.h>

#include "fusedcomm.h"

namespace fc {

// Record `msg` (printf format) as this thread's last error, log it at WARN, and
// return `res` so that callers can write `return setError(fcInvalidArgument, ...)`.
fcResult_t setError(fcResult_t res, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Prefix this thread's last error with a context ("bootstrap rank 2: ...") and
// return `res` unchanged. Used where a lower layer already explained the failure.
fcResult_t addContext(fcResult_t res, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Clear this thread's last error (at the start of every public call).
void clearError();

// This thread's last error message ("" when none).
const char* lastError();

}  // namespace fc

// Propagate a non-success fcResult_t; the callee already recorded the message.
#define FC_CHECK(call)                       \
  do {                                       \
    fcResult_t fc_res_ = (call);             \
    if (fc_res_ != fcSuccess) return fc_res_; \
  } while (0)

// A CUDA runtime call that must succeed.
#define FC_CUDA_CHECK(call)                                                        \
  do {                                                                             \
    cudaError_t fc_err_ = (call);                                                  \
    if (fc_err_ != cudaSuccess)                                                    \
      return ::fc::setError(fcUnhandledCudaError, "%s:%d: %s failed: %s (%s)",     \
                            __FILE__, __LINE__, #call, cudaGetErrorString(fc_err_), \
                            cudaGetErrorName(fc_err_));                            \
  } while (0)

// An OS call that returns -1 and sets errno on failure.
#define FC_SYS_CHECK(call, what)                                                \
  do {                                                                          \
    if ((call) == -1)                                                           \
      return ::fc::setError(fcSystemError, "%s failed: %s", what, strerror(errno)); \
  } while (0)
