// One instantiation of the all-gather + GEMM engine: fp16, B [K, N] (fcOpN), tiles and
// cluster 128x224c2x1, cooperative (engine.cc chooses; allgather_gemm.cuh has the kernel).
// CuTe's extended wgmma shapes, so that the MMA is 64 x 224 (allgather_gemm.cuh, "widths").
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#include "gemm/engine/allgather_gemm.cuh"

namespace fc::engine {

fcResult_t runAllGatherGemm_fp16_n_128x224c2x1(const EngineGemm& g, cudaStream_t stream) {
  return EngineGemmKernel<cutlass::half_t, false, Config128x224c2x1>::run(g, stream);
}

}  // namespace fc::engine
