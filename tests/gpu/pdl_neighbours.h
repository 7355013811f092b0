// The kernels test_pdl_neighbours.cc puts around our collectives: a consumer that
// checks our outputs and producers that write our inputs late, each launched the way
// a neighbouring kernel of an inference engine is (programmatic dependent launch or
// not). Plain host functions, so that the Catch2 test itself is compiled as C++.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace pdltest {

// Launch, on `stream` with programmatic stream serialization (PDL; the launch may
// start as soon as the kernel before it triggers its dependents), a kernel that
// compares `bytes` of got with want (both 16-byte aligned, bytes a multiple of 4) and
// adds the number of differing 32-bit words to *mismatches. wait: it executes
// griddepcontrol.wait (cudaGridDependencySynchronize) before its first read, as every
// PDL-launched kernel must; false only to measure what a kernel that skips it would see.
cudaError_t launchCheck(const void* got, const void* want, size_t bytes, unsigned* mismatches, bool wait,
                        cudaStream_t stream);

// One copy of a producer: `bytes` (a multiple of 4) from src to dst.
struct Copy {
  const void* src;
  void* dst;
  size_t bytes;
};

// Launch a producer that writes our inputs late: every thread spins for `delayNs`
// (%globaltimer), then the grid performs the copies. earlyTrigger: launched with PDL
// and executing griddepcontrol.launch_dependents first thing (what a GEMM with an early
// trigger does), then griddepcontrol.wait for its own predecessor, then the delay and
// the writes; the next kernel on the stream may then start long before the writes.
// Otherwise launched normally, without a trigger: the next kernel cannot start before
// this one completes.
cudaError_t launchProducer(const Copy* copies, int n, long long delayNs, bool earlyTrigger, cudaStream_t stream);

}  // namespace pdltest
