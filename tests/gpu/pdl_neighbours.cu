// The neighbouring kernels of test_pdl_neighbours.cc (pdl_neighbours.h says what each
// does and why).
#include "pdl_neighbours.h"

#include <cstdint>
#include <cstdlib>
#include <string>

namespace pdltest {
namespace {

constexpr int kMaxCopies = 4;
struct Copies {
  Copy c[kMaxCopies];
  int n;
};

__device__ __forceinline__ void gridDependencyWait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void triggerDependents() { asm volatile("griddepcontrol.launch_dependents;"); }

__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void checkKernel(const uint32_t* got, const uint32_t* want, size_t words, unsigned* mismatches,
                            bool wait) {
  if (wait) gridDependencyWait();
  unsigned bad = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t g = got[i], w = want[i];
    if (g != w) {
      ++bad;
      // One mismatch kept for the report: [1] its word, [2] what was read, [3] the
      // verified value (the first thread to find one writes them).
      if (atomicCAS(mismatches + 1, 0xffffffffu, unsigned(i)) == 0xffffffffu) {
        mismatches[2] = g;
        mismatches[3] = w;
      }
    }
  }
  // One atomic per warp with a mismatch.
  for (int o = 16; o > 0; o >>= 1) bad += __shfl_down_sync(0xffffffffu, bad, o);
  if ((threadIdx.x & 31) == 0 && bad) atomicAdd(mismatches, bad);
}

__global__ void producerKernel(Copies copies, long long delayNs, bool earlyTrigger) {
  if (earlyTrigger) {
    triggerDependents();
    // Its own inputs (here: the buffers it overwrites, which the previous iteration's
    // kernels read) only after its predecessor: what any PDL-launched kernel must do.
    gridDependencyWait();
  }
  const uint64_t start = globalTimerNs();
  while (globalTimerNs() - start < uint64_t(delayNs)) {
  }
  for (int k = 0; k < copies.n; ++k) {
    const uint32_t* src = static_cast<const uint32_t*>(copies.c[k].src);
    uint32_t* dst = static_cast<uint32_t*>(copies.c[k].dst);
    const size_t words = copies.c[k].bytes / 4;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
      dst[i] = src[i];
  }
}

// FC_TEST_PDL_ATTR=0: the neighbours launched without the PDL attribute (plain stream
// order), to tell a PDL ordering problem from any other when a case fails.
bool pdlAttrAllowed() {
  const char* v = getenv("FC_TEST_PDL_ATTR");
  return v == nullptr || std::string(v) != "0";
}

cudaLaunchConfig_t config(unsigned grid, cudaStream_t stream, bool pdl, cudaLaunchAttribute* attr) {
  pdl = pdl && pdlAttrAllowed();
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(256);
  cfg.stream = stream;
  if (pdl) {
    attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr->val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  return cfg;
}

// Enough CTAs to cover the GPU, at most one per 256 words.
unsigned gridFor(size_t words) {
  const size_t g = (words + 255) / 256;
  return unsigned(g < 264 ? (g ? g : 1) : 264);
}

}  // namespace

cudaError_t launchCheck(const void* got, const void* want, size_t bytes, unsigned* mismatches, bool wait,
                        cudaStream_t stream) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = config(gridFor(bytes / 4), stream, true, &attr);
  return cudaLaunchKernelEx(&cfg, checkKernel, static_cast<const uint32_t*>(got),
                            static_cast<const uint32_t*>(want), bytes / 4, mismatches, wait);
}

cudaError_t launchProducer(const Copy* copies, int n, long long delayNs, bool earlyTrigger, cudaStream_t stream) {
  if (n < 0 || n > kMaxCopies) return cudaErrorInvalidValue;
  Copies cs{};
  cs.n = n;
  size_t most = 0;
  for (int k = 0; k < n; ++k) {
    cs.c[k] = copies[k];
    most = copies[k].bytes > most ? copies[k].bytes : most;
  }
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = config(gridFor(most / 4), stream, earlyTrigger, &attr);
  return cudaLaunchKernelEx(&cfg, producerKernel, cs, delayNs, earlyTrigger);
}

}  // namespace pdltest
