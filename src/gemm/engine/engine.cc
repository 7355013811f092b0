#include "gemm/engine/engine.h"

#include <climits>

#include "core/result.h"

namespace fc::engine {

// The instantiations (allgather_gemm_<type>_<B layout>_<config>.cu).
#define FC_ENGINE_DECLARE(type, layout)                                                             \
  fcResult_t runAllGatherGemm_##type##_##layout##_128x256c2x1(const EngineGemm&, cudaStream_t); \
  fcResult_t runAllGatherGemm_##type##_##layout##_128x128c2x1(const EngineGemm&, cudaStream_t);
FC_ENGINE_DECLARE(bf16, n)
FC_ENGINE_DECLARE(bf16, t)
FC_ENGINE_DECLARE(fp16, n)
FC_ENGINE_DECLARE(fp16, t)
#undef FC_ENGINE_DECLARE
// GEMM + reduce-scatter (scatter_gemm_<type>_<B layout>_128x256c2x1.cu).
fcResult_t runScatterGemm_bf16_n_128x256c2x1(const EngineGemm&, cudaStream_t);
fcResult_t runScatterGemm_bf16_t_128x256c2x1(const EngineGemm&, cudaStream_t);
fcResult_t runScatterGemm_fp16_n_128x256c2x1(const EngineGemm&, cudaStream_t);
fcResult_t runScatterGemm_fp16_t_128x256c2x1(const EngineGemm&, cudaStream_t);

namespace {

// 128 x 128 tiles when they need fewer waves of the GPU than 128 x 256 ones, counted
// in the time of a 128 x 256 tile (two of the smaller ones), by more than 5 %: on
// small problems they keep more SMs busy, on large ones the bigger tiles reuse more
// (measured interleaved on one H200, docs/perf-log.md: 512 x 3072 x 4096 in 24.4
// instead of 43.0 us, 512 x 27648 x 5120 in 196 instead of 217; but 512 x 14336 x
// 4096, a tie in waves, in 84.8 with the bigger tiles against 90.0).
bool smallTiles(const EngineGemm& g) {
  const size_t sms = size_t(g.smCount);
  const size_t rows = (g.M + 127) / 128;
  const size_t big = rows * ((g.N + 255) / 256), small = rows * ((g.N + 127) / 128);
  const size_t bigWaves2 = 2 * ((big + sms - 1) / sms), smallWaves = (small + sms - 1) / sms;
  return double(smallWaves) < 0.95 * double(bigWaves2);
}

}  // namespace

bool engineSupports(const EngineGemm& g) {
  if (g.datatype != fcBfloat16 && g.datatype != fcFloat16) return false;
  if (g.M > INT_MAX || g.N > INT_MAX || g.K > INT_MAX) return false;
  // TMA: every row starts 16-byte aligned (8 elements), and so do the bases.
  const uintptr_t bases = reinterpret_cast<uintptr_t>(g.A) | reinterpret_cast<uintptr_t>(g.B) |
                          reinterpret_cast<uintptr_t>(g.D);
  return g.K % 8 == 0 && g.N % 8 == 0 && bases % 16 == 0;
}

fcResult_t launchAllGatherGemm(const EngineGemm& g, cudaStream_t stream) {
  const bool t = g.transB == fcOpT, small = smallTiles(g);
  if (g.datatype == fcBfloat16) {
    if (t) return small ? runAllGatherGemm_bf16_t_128x128c2x1(g, stream) : runAllGatherGemm_bf16_t_128x256c2x1(g, stream);
    return small ? runAllGatherGemm_bf16_n_128x128c2x1(g, stream) : runAllGatherGemm_bf16_n_128x256c2x1(g, stream);
  }
  if (t) return small ? runAllGatherGemm_fp16_t_128x128c2x1(g, stream) : runAllGatherGemm_fp16_t_128x256c2x1(g, stream);
  return small ? runAllGatherGemm_fp16_n_128x128c2x1(g, stream) : runAllGatherGemm_fp16_n_128x256c2x1(g, stream);
}

size_t scatterGemmTiles(const EngineGemm& g) { return (g.signal.blockRows / 128) * ((g.N + 255) / 256); }

bool scatterGemmSupports(const EngineGemm& g) {
  return engineSupports(g) && g.signal.blockRows > 0 && g.signal.blockRows % 128 == 0;
}

fcResult_t launchMatmulScatterGemm(const EngineGemm& g, cudaStream_t stream) {
  const bool t = g.transB == fcOpT;
  if (g.datatype == fcBfloat16)
    return t ? runScatterGemm_bf16_t_128x256c2x1(g, stream) : runScatterGemm_bf16_n_128x256c2x1(g, stream);
  return t ? runScatterGemm_fp16_t_128x256c2x1(g, stream) : runScatterGemm_fp16_n_128x256c2x1(g, stream);
}

}  // namespace fc::engine
