// One instantiation of the GEMM + all-reduce engine (the GEMM + reduce-scatter engine
// whose own block's sums also go to the peer: GatherFusionOf, own_block_epilogue.cuh):
// fp16, B [K, N] (fcOpN), 128 x 256 tiles in 2 x 1 clusters, cooperative.
#include "gemm/engine/allgather_gemm.cuh"

namespace fc::engine {

fcResult_t runScatterGatherGemm_fp16_n_128x256c2x1(const EngineGemm& g, cudaStream_t stream) {
  return EngineGemmKernel<cutlass::half_t, false, Config128x256c2x1, ScatterSchedulerTag<false>, true, true>::run(g, stream);
}

}  // namespace fc::engine
