// One instantiation of the GEMM + reduce-scatter engine at 3-8 ranks (the chain of fp32
// running sums: ChainFusionOf, own_block_epilogue.cuh): fp16, B [N, K] (fcOpT), 128 x 128 tiles in
// 2 x 1 clusters, ping-pong.
#include "gemm/engine/allgather_gemm.cuh"

namespace fc::engine {

fcResult_t runScatterChainGemm_fp16_t_128x128c2x1p(const EngineGemm& g, cudaStream_t stream) {
  return EngineGemmKernel<cutlass::half_t, true, Config128x128c2x1Pingpong, ScatterSchedulerTag<true>, true, false,
                          true>::run(g, stream);
}

}  // namespace fc::engine
