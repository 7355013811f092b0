// One instantiation of the all-gather + GEMM engine: bf16, B [N, K] (fcOpT).
#include "gemm/engine/allgather_gemm.cuh"

namespace fc::engine {

fcResult_t runAllGatherGemm_bf16_t(const AllGatherGemm& g, cudaStream_t stream) {
  return AllGatherGemmKernel<cutlass::bfloat16_t, true>::run(g, stream);
}

}  // namespace fc::engine
