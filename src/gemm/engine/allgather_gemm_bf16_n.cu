// One instantiation of the all-gather + GEMM engine: bf16, B [K, N] (fcOpN).
#include "gemm/engine/allgather_gemm.cuh"

namespace fc::engine {

fcResult_t runAllGatherGemm_bf16_n(const AllGatherGemm& g, cudaStream_t stream) {
  return AllGatherGemmKernel<cutlass::bfloat16_t, false>::run(g, stream);
}

}  // namespace fc::engine
