// One instantiation of the all-gather + GEMM engine: fp16, B [N, K] (fcOpT).
#include "gemm/engine/allgather_gemm.cuh"

namespace fc::engine {

fcResult_t runAllGatherGemm_fp16_t(const AllGatherGemm& g, cudaStream_t stream) {
  return AllGatherGemmKernel<cutlass::half_t, true>::run(g, stream);
}

}  // namespace fc::engine
