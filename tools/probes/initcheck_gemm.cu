// Does compute-sanitizer's initcheck see the stores of a cuBLASLt GEMM? On 2 H200s it
// reported every read of fcMatmulReduceScatter's partials, which a cuBLASLt GEMM had
// just written into the channel's scratch (docs/design.md, "Checking with
// compute-sanitizer"); our reading is that it does not track Hopper's TMA stores.
//
// D, a fresh cudaMalloc never written otherwise, is written by the library's cuBLASLt
// GEMM (fc::Gemm, as the fused ops call it), then read in full by readAfterGemm.
// Control: D2, equally fresh, is written by a plain kernel (storeKernel) and read in
// full by readAfterKernel. Every value read is checked against the host's reference
// (integer inputs, so exact), so the bytes read are the ones written.
//
// Run: compute-sanitizer --tool initcheck build/tools/probes/initcheck-gemm
// Reports naming readAfterGemm and none naming readAfterKernel: the tool misses the
// GEMM's stores (the limitation). Reports in readAfterKernel too: something else.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gemm/gemm.h"
#include "probe_check.h"

namespace {

constexpr int kM = 512, kN = 512, kK = 256;

__global__ void storeKernel(__nv_bfloat16* d, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    d[i] = __float2bfloat16(float(kK));
}

// Counts the elements that differ from `want` (one reader kernel per source, so the
// tool's reports name the source by kernel).
__global__ void readAfterGemm(const __nv_bfloat16* d, size_t n, float want, unsigned* bad) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    if (__bfloat162float(d[i]) != want) atomicAdd(bad, 1u);
}
__global__ void readAfterKernel(const __nv_bfloat16* d, size_t n, float want, unsigned* bad) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    if (__bfloat162float(d[i]) != want) atomicAdd(bad, 1u);
}

}  // namespace

int main() {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("SKIP: no CUDA GPU here\n");
    return 77;
  }
  // A and B all ones: every element of D = A x B^T is K, exactly.
  std::vector<__nv_bfloat16> ones(size_t(kM) * kK > size_t(kN) * kK ? size_t(kM) * kK : size_t(kN) * kK,
                                  __float2bfloat16(1.f));
  void *a, *b, *d, *d2;
  unsigned* bad;
  CK(cudaMalloc(&a, size_t(kM) * kK * 2));
  CK(cudaMalloc(&b, size_t(kN) * kK * 2));
  CK(cudaMalloc(&d, size_t(kM) * kN * 2));
  CK(cudaMalloc(&d2, size_t(kM) * kN * 2));
  CK(cudaMalloc(&bad, 2 * sizeof(unsigned)));
  CK(cudaMemcpy(a, ones.data(), size_t(kM) * kK * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, ones.data(), size_t(kN) * kK * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(bad, 0, 2 * sizeof(unsigned)));
  fc::Gemm gemm;
  if (gemm.init(false) != fcSuccess || gemm.matmul(a, kM, b, d, kN, kK, fcOpT, fcBfloat16, nullptr) != fcSuccess) {
    std::fprintf(stderr, "the cuBLASLt GEMM failed: %s\n", fcGetLastError(nullptr));
    return 1;
  }
  CK(cudaGetLastError());
  const size_t n = size_t(kM) * kN;
  readAfterGemm<<<64, 256>>>(static_cast<const __nv_bfloat16*>(d), n, float(kK), bad);
  CK(cudaGetLastError());
  storeKernel<<<64, 256>>>(static_cast<__nv_bfloat16*>(d2), n);
  CK(cudaGetLastError());
  readAfterKernel<<<64, 256>>>(static_cast<const __nv_bfloat16*>(d2), n, float(kK), bad + 1);
  CK(cudaGetLastError());
  unsigned h[2];
  CK(cudaMemcpy(h, bad, sizeof h, cudaMemcpyDeviceToHost));
  std::printf("%d x %d x %d bf16 GEMM (cuBLASLt) then a read of all of D: %u of %zu wrong; "
              "a kernel's stores then the same read: %u wrong\n", kM, kN, kK, h[0], n, h[1]);
  for (void* p : {a, b, d, d2, static_cast<void*>(bad)}) CK(cudaFree(p));
  return h[0] == 0 && h[1] == 0 ? 0 : 1;
}
