// gemm-configs candidate: 128 x 256 x 64 / 2 x 1 cooperative with CUTLASS's stock
// persistent scheduler (raster chosen by its heuristic): what our scheduler costs.
#include "gemm/engine/allgather_gemm.cuh"
#include "gemm_configs.h"

namespace fc::engine::probe {

fcResult_t stock128x256c2x1(const EngineGemm& g, cudaStream_t stream) {
  return EngineGemmKernel<cutlass::bfloat16_t, true, Config128x256c2x1, cutlass::gemm::PersistentScheduler>::run(
      g, stream);
}

}  // namespace fc::engine::probe
