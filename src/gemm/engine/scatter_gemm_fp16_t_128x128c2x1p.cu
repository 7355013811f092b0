// One instantiation of the GEMM + reduce-scatter engine: fp16, B [N, K] (fcOpT), 128 x
// 128 tiles in 2 x 1 clusters, ping-pong (each consumer warp group on its own tile, one's
// epilogue under the other's mainloop), tiles handed out in order as clusters ask
// (scatter_scheduler.cuh), each signalling its owner once stored (allgather_gemm.cuh has
// the kernel, tile_signal_epilogue.cuh the signal).
#include "gemm/engine/allgather_gemm.cuh"

namespace fc::engine {

fcResult_t runScatterGemm_fp16_t_128x128c2x1p(const EngineGemm& g, cudaStream_t stream) {
  return EngineGemmKernel<cutlass::half_t, true, Config128x128c2x1Pingpong, ScatterSchedulerTag<true>, true>::run(g, stream);
}

}  // namespace fc::engine
