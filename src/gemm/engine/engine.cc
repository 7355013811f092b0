#include "gemm/engine/engine.h"

#include <climits>

#include "core/result.h"

namespace fc::engine {

// The instantiations (allgather_gemm_<type>_<B layout>_<config>.cu).
#define FC_ENGINE_DECLARE(type, layout)                                                             \
  fcResult_t runAllGatherGemm_##type##_##layout##_128x256c2x1(const AllGatherGemm&, cudaStream_t); \
  fcResult_t runAllGatherGemm_##type##_##layout##_128x128c2x1(const AllGatherGemm&, cudaStream_t);
FC_ENGINE_DECLARE(bf16, n)
FC_ENGINE_DECLARE(bf16, t)
FC_ENGINE_DECLARE(fp16, n)
FC_ENGINE_DECLARE(fp16, t)
#undef FC_ENGINE_DECLARE

namespace {

// 128 x 128 tiles when 128 x 256 ones would not fill two waves of the GPU: more CTAs
// share the work of a small problem (measured on one H200, docs/perf-log.md: 512 x 3072 x
// 4096 in 23.5 instead of 42.0 us; 2048 x 3072 x 4096 in 68.8 instead of 83.8 us).
bool smallTiles(const AllGatherGemm& g) {
  const size_t tiles = (g.M + 127) / 128 * ((g.N + 255) / 256);
  return tiles < 2 * size_t(g.smCount);
}

}  // namespace

bool allGatherGemmSupports(const AllGatherGemm& g) {
  if (g.datatype != fcBfloat16 && g.datatype != fcFloat16) return false;
  if (g.M > INT_MAX || g.N > INT_MAX || g.K > INT_MAX) return false;
  // TMA: every row starts 16-byte aligned (8 elements), and so do the bases.
  const uintptr_t bases = reinterpret_cast<uintptr_t>(g.A) | reinterpret_cast<uintptr_t>(g.B) |
                          reinterpret_cast<uintptr_t>(g.D);
  return g.K % 8 == 0 && g.N % 8 == 0 && bases % 16 == 0;
}

fcResult_t launchAllGatherGemm(const AllGatherGemm& g, cudaStream_t stream) {
  const bool t = g.transB == fcOpT, small = smallTiles(g);
  if (g.datatype == fcBfloat16) {
    if (t) return small ? runAllGatherGemm_bf16_t_128x128c2x1(g, stream) : runAllGatherGemm_bf16_t_128x256c2x1(g, stream);
    return small ? runAllGatherGemm_bf16_n_128x128c2x1(g, stream) : runAllGatherGemm_bf16_n_128x256c2x1(g, stream);
  }
  if (t) return small ? runAllGatherGemm_fp16_t_128x128c2x1(g, stream) : runAllGatherGemm_fp16_t_128x256c2x1(g, stream);
  return small ? runAllGatherGemm_fp16_n_128x128c2x1(g, stream) : runAllGatherGemm_fp16_n_128x256c2x1(g, stream);
}

}  // namespace fc::engine
