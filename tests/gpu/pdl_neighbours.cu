// The neighbouring kernels of test_pdl_neighbours.cc (pdl_neighbours.h says what each
// does and why).
#include "pdl_neighbours.h"

#include <cstdint>

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
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    bad += got[i] != want[i];
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

cudaLaunchConfig_t config(unsigned grid, cudaStream_t stream, bool pdl, cudaLaunchAttribute* attr) {
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
