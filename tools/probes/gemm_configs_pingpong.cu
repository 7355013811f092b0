// gemm-configs candidate: 128 x 128 x 64 / 2 x 1 ping-pong (each consumer warp group
// on its own tile) with our scheduler.
#include "gemm/engine/allgather_gemm.cuh"
#include "gemm_configs.h"

namespace fc::engine::probe {

fcResult_t pingpong128x128c2x1(const EngineGemm& g, cudaStream_t stream) {
  return EngineGemmKernel<cutlass::bfloat16_t, true, EngineConfig<128, 128, 64, 2, 1, true>>::run(g, stream);
}

}  // namespace fc::engine::probe
