// Loading every libfusedcomm kernel into a CUDA context when a communicator is made.
//
// Why: CUDA loads kernels lazily by default (CUDA_MODULE_LOADING=LAZY), at their
// first launch, and that load may wait until the context is idle (CUDA Programming
// Guide, "Lazy Loading", possible issues: concurrent execution). One of our ops can
// enqueue a kernel that spins on a peer and then, in the same call, the first launch
// of another kernel: with one thread driving every rank (fcCommInitAll) that launch
// waits for the spinning kernel, which waits for a peer the thread has not reached
// yet, until the deadline turns it into a timeout (found on 2 H200s: the copy-engine
// reduce-scatter's first call). Loading them all at init removes the hazard and the
// first call's load time. cuBLASLt's kernels are not ours to load: see fcCommInitAll.
//
// Each translation unit that defines kernels names one of them with
// FC_PRELOAD_MODULE_OF; preloadKernels() loads every kernel of each such unit's CUDA
// library (cuKernelGetLibrary + cuLibraryEnumerateKernels, CUDA >= 12.5 drivers).
#pragma once

#include "fusedcomm.h"

namespace fc {

// Records `kernel` (a __global__ function's host address); called from static
// initialisers, makes no CUDA call. Returns true.
bool registerKernelModule(const void* kernel);

// Loads every kernel of every registered unit into the current device's context.
// Where the driver lacks the entry points, logs at INFO and returns fcSuccess
// (kernels then load lazily, as before); a failed load is an error.
fcResult_t preloadKernels();

}  // namespace fc

#define FC_PRELOAD_CAT2(a, b) a##b
#define FC_PRELOAD_CAT(a, b) FC_PRELOAD_CAT2(a, b)
// At namespace scope in a .cu file: registers the unit that defines the kernel named
// (variadic so that template arguments may hold commas).
#define FC_PRELOAD_MODULE_OF(...)                                               \
  [[maybe_unused]] static const bool FC_PRELOAD_CAT(fcPreloadAnchor_, __LINE__) = \
      ::fc::registerKernelModule(reinterpret_cast<const void*>(__VA_ARGS__))
