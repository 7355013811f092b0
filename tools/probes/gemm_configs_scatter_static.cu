// gemm-configs candidate: the GEMM + reduce-scatter engine's ping-pong kernel (bf16,
// B [N, K], signalling epilogue) with the all-gather engine's static scheduler, which
// computes each CTA's tiles itself (no scheduler warp, no pipeline of tiles): what the
// library's scatter scheduler, which hands tiles out dynamically, costs
// (scatter_scheduler.cuh).
#include "gemm/engine/allgather_gemm.cuh"
#include "gemm_configs.h"

namespace fc::engine::probe {

fcResult_t scatterStatic128x128c2x1p(const EngineGemm& g, cudaStream_t stream) {
  return EngineGemmKernel<cutlass::bfloat16_t, true, Config128x128c2x1Pingpong, ReadinessSchedulerTag, true>::run(
      g, stream);
}

}  // namespace fc::engine::probe
