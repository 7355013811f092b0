// One instantiation of the all-gather + GEMM engine: bf16, B [K, N] (fcOpN), tiles and
// cluster 128x192c2x1, cooperative (engine.cc chooses; allgather_gemm.cuh has the kernel).
#include "gemm/engine/allgather_gemm.cuh"

namespace fc::engine {

fcResult_t runAllGatherGemm_bf16_n_128x192c2x1(const EngineGemm& g, cudaStream_t stream) {
  return EngineGemmKernel<cutlass::bfloat16_t, false, Config128x192c2x1>::run(g, stream);
}

}  // namespace fc::engine
