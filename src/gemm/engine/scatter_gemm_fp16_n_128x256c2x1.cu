// One instantiation of the GEMM + reduce-scatter engine: fp16, B [K, N] (fcOpN), tiles
// and cluster 128x256c2x1, tiles handed out in order as clusters ask
// (scatter_scheduler.cuh), each signalling its owner once stored (allgather_gemm.cuh has
// the kernel, tile_signal_epilogue.cuh the signal).
#include "gemm/engine/allgather_gemm.cuh"

namespace fc::engine {

fcResult_t runScatterGemm_fp16_n_128x256c2x1(const EngineGemm& g, cudaStream_t stream) {
  return EngineGemmKernel<cutlass::half_t, false, Config128x256c2x1, ScatterSchedulerTag<false>, true>::run(g, stream);
}

}  // namespace fc::engine
