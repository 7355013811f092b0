#include "gemm/engine/engine.h"

#include <climits>

#include "core/result.h"

namespace fc::engine {

// The instantiations (allgather_gemm_<type>_<B layout>.cu).
fcResult_t runAllGatherGemm_bf16_n(const AllGatherGemm& g, cudaStream_t stream);
fcResult_t runAllGatherGemm_bf16_t(const AllGatherGemm& g, cudaStream_t stream);
fcResult_t runAllGatherGemm_fp16_n(const AllGatherGemm& g, cudaStream_t stream);
fcResult_t runAllGatherGemm_fp16_t(const AllGatherGemm& g, cudaStream_t stream);

bool allGatherGemmSupports(const AllGatherGemm& g) {
  if (g.datatype != fcBfloat16 && g.datatype != fcFloat16) return false;
  if (g.M > INT_MAX || g.N > INT_MAX || g.K > INT_MAX) return false;
  // TMA: every row starts 16-byte aligned (8 elements), and so do the bases.
  const uintptr_t bases = reinterpret_cast<uintptr_t>(g.A) | reinterpret_cast<uintptr_t>(g.B) |
                          reinterpret_cast<uintptr_t>(g.D);
  return g.K % 8 == 0 && g.N % 8 == 0 && bases % 16 == 0;
}

fcResult_t launchAllGatherGemm(const AllGatherGemm& g, cudaStream_t stream) {
  const bool t = g.transB == fcOpT;
  if (g.datatype == fcBfloat16) return t ? runAllGatherGemm_bf16_t(g, stream) : runAllGatherGemm_bf16_n(g, stream);
  return t ? runAllGatherGemm_fp16_t(g, stream) : runAllGatherGemm_fp16_n(g, stream);
}

}  // namespace fc::engine
