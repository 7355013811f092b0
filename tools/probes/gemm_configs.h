// The GEMM engine's candidate configurations that the library does not build, for
// gemm-configs (one translation unit each: gemm_configs_<name>.cu).
#pragma once

#include "gemm/engine/engine.h"

namespace fc::engine::probe {

// bf16, B [N, K]; D = A x B^T.
fcResult_t stock128x256c2x1(const EngineGemm& g, cudaStream_t stream);     // CUTLASS's own scheduler
fcResult_t coop128x128c2x1(const EngineGemm& g, cudaStream_t stream);      // ours, cooperative
fcResult_t coop256x128c2x1(const EngineGemm& g, cudaStream_t stream);      // ours, cooperative
// 128 x 112 ping-pong (CuTe's extended wgmma shapes, 64 x 112 epilogue subtiles), not
// built in the library: 1.01-1.08x ahead of the rule at 256-1536 x 3584-7168 only.
fcResult_t pingpong128x112c2x1(const EngineGemm& g, cudaStream_t stream);
fcResult_t scatterStatic128x128c2x1p(const EngineGemm& g, cudaStream_t stream);  // scatter, no tile pipeline
// The stream-K schedule in shard order (shard_streamk_scheduler.cuh), cooperative.
fcResult_t streamK128x128c2x1(const EngineGemm& g, cudaStream_t stream);
fcResult_t streamK128x256c2x1(const EngineGemm& g, cudaStream_t stream);

}  // namespace fc::engine::probe
