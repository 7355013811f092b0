// gemm-configs candidate: 128 x 112 x 64 / 2 x 1 ping-pong with our scheduler, its
// epilogue in 64 x 112 subtiles. With CUTLASS's automatic epilogue subtile (64 x 16 at this
// width: gcd(32, 112)) it took 1.9-2.0x the 128-wide tiles' time (forty-first session).
// cuBLASLt's pick at 512 / 1024 x 3584 (112 x 128 in its column-major view).
// CuTe picks the largest wgmma N that divides the tile's only among 8-256 in steps of 8
// where this is defined (cute/arch/mma_sm90.hpp); without it, among 256, 192, 128, 96,
// 64, 32, 16, 8: 64 x 16 instructions at N 112, 64 x 32 at 224.
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#include "gemm/engine/allgather_gemm.cuh"
#include "gemm_configs.h"

namespace fc::engine::probe {

fcResult_t pingpong128x112c2x1(const EngineGemm& g, cudaStream_t stream) {
  using Config = EngineConfig<128, 112, 64, 2, 1, true, cute::Shape<cute::_64, cute::_112>>;
  return EngineGemmKernel<cutlass::bfloat16_t, true, Config>::run(g, stream);
}

}  // namespace fc::engine::probe
