// gemm-configs candidate: 256 x 128 x 64 / 2 x 1 cooperative (B tiles multicast along M) with our scheduler.
#include "gemm/engine/allgather_gemm.cuh"
#include "gemm_configs.h"

namespace fc::engine::probe {

fcResult_t coop256x128c2x1(const EngineGemm& g, cudaStream_t stream) {
  return EngineGemmKernel<cutlass::bfloat16_t, true, EngineConfig<256, 128, 64, 2, 1>>::run(g, stream);
}

}  // namespace fc::engine::probe
