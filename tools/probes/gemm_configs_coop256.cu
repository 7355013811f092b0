// gemm-configs candidate: 256 x 128 x 64 / 1 x 2 cooperative (A tiles multicast along
// the cluster's N) with our scheduler.
#include "gemm/engine/allgather_gemm.cuh"
#include "gemm_configs.h"

namespace fc::engine::probe {

fcResult_t coop256x128c1x2(const EngineGemm& g, cudaStream_t stream) {
  return EngineGemmKernel<cutlass::bfloat16_t, true, EngineConfig<256, 128, 64, 1, 2>>::run(g, stream);
}

}  // namespace fc::engine::probe
