// gemm-configs candidate: 128 x 128 x 64 / 2 x 1 cooperative (both consumer warp
// groups on one tile) with our scheduler; the library takes the ping-pong one.
#include "gemm/engine/allgather_gemm.cuh"
#include "gemm_configs.h"

namespace fc::engine::probe {

fcResult_t coop128x128c2x1(const EngineGemm& g, cudaStream_t stream) {
  return EngineGemmKernel<cutlass::bfloat16_t, true, Config128x128c2x1>::run(g, stream);
}

}  // namespace fc::engine::probe
