#include "gemm/engine/engine.h"

#include <algorithm>
#include <climits>

#include "core/log.h"
#include "core/result.h"
#include "tuning/tuning.h"

namespace fc::engine {

// The instantiations: all-gather + GEMM (allgather_gemm_<type>_<B layout>_<config>.cu),
// GEMM + reduce-scatter (scatter_gemm_...) and GEMM + all-reduce (scatter_gather_gemm_...:
// the reduce-scatter's kernel whose own block's sums also go to the peer), each in two
// configurations ('p': ping-pong), in a table [fp16][B^T][128 x 128 tiles]; the
// all-gather engine on six widths (tuning::engineTileN), in a table [fp16][B^T][width]
// in kAllGatherWidths' order.
#define FC_ENGINE_DECLARE(kind, type, layout)                                                  \
  fcResult_t run##kind##Gemm_##type##_##layout##_128x256c2x1(const EngineGemm&, cudaStream_t); \
  fcResult_t run##kind##Gemm_##type##_##layout##_128x128c2x1p(const EngineGemm&, cudaStream_t);
#define FC_ENGINE_DECLARE_ALL(kind)  \
  FC_ENGINE_DECLARE(kind, bf16, n) \
  FC_ENGINE_DECLARE(kind, bf16, t) \
  FC_ENGINE_DECLARE(kind, fp16, n) \
  FC_ENGINE_DECLARE(kind, fp16, t)
FC_ENGINE_DECLARE_ALL(AllGather)
FC_ENGINE_DECLARE_ALL(Scatter)
FC_ENGINE_DECLARE_ALL(ScatterGather)
#undef FC_ENGINE_DECLARE_ALL
#undef FC_ENGINE_DECLARE
// The all-gather engine's other widths (tuning::engineTileN).
#define FC_ENGINE_DECLARE_OTHER(type, layout)                                                   \
  fcResult_t runAllGatherGemm_##type##_##layout##_128x192c2x1(const EngineGemm&, cudaStream_t); \
  fcResult_t runAllGatherGemm_##type##_##layout##_128x96c2x1p(const EngineGemm&, cudaStream_t); \
  fcResult_t runAllGatherGemm_##type##_##layout##_128x224c2x1(const EngineGemm&, cudaStream_t); \
  fcResult_t runAllGatherGemm_##type##_##layout##_128x160c2x1(const EngineGemm&, cudaStream_t);
FC_ENGINE_DECLARE_OTHER(bf16, n)
FC_ENGINE_DECLARE_OTHER(bf16, t)
FC_ENGINE_DECLARE_OTHER(fp16, n)
FC_ENGINE_DECLARE_OTHER(fp16, t)
#undef FC_ENGINE_DECLARE_OTHER
// GEMM + reduce-scatter at 3-8 ranks (scatter_chain_gemm_...): 128 x 128 ping-pong only,
// the tiles fcMatmulAllReduce's engine measured ahead at every K.
fcResult_t runScatterChainGemm_bf16_n_128x128c2x1p(const EngineGemm&, cudaStream_t);
fcResult_t runScatterChainGemm_bf16_t_128x128c2x1p(const EngineGemm&, cudaStream_t);
fcResult_t runScatterChainGemm_fp16_n_128x128c2x1p(const EngineGemm&, cudaStream_t);
fcResult_t runScatterChainGemm_fp16_t_128x128c2x1p(const EngineGemm&, cudaStream_t);

namespace {

using Run = fcResult_t (*)(const EngineGemm&, cudaStream_t);
#define FC_ENGINE_ENTRY(kind, type, layout) \
  { run##kind##Gemm_##type##_##layout##_128x256c2x1, run##kind##Gemm_##type##_##layout##_128x128c2x1p }
#define FC_ENGINE_TABLE(kind)                                           \
  {{FC_ENGINE_ENTRY(kind, bf16, n), FC_ENGINE_ENTRY(kind, bf16, t)},  \
   {FC_ENGINE_ENTRY(kind, fp16, n), FC_ENGINE_ENTRY(kind, fp16, t)}}
const Run kScatter[2][2][2] = FC_ENGINE_TABLE(Scatter);
const Run kScatterGather[2][2][2] = FC_ENGINE_TABLE(ScatterGather);
#undef FC_ENGINE_TABLE
#undef FC_ENGINE_ENTRY
// Widest first; cooperative kernels from 160 columns, ping-pong ones (the units' "p") at
// 128 and 96.
constexpr int kAllGatherWidths[] = {256, 224, 192, 160, 128, 96};
constexpr int kAllGatherWidthCount = sizeof(kAllGatherWidths) / sizeof(kAllGatherWidths[0]);
#define FC_ALLGATHER_ENTRY(type, layout)                                                            \
  {                                                                                                 \
    runAllGatherGemm_##type##_##layout##_128x256c2x1, runAllGatherGemm_##type##_##layout##_128x224c2x1, \
        runAllGatherGemm_##type##_##layout##_128x192c2x1, runAllGatherGemm_##type##_##layout##_128x160c2x1, \
        runAllGatherGemm_##type##_##layout##_128x128c2x1p, runAllGatherGemm_##type##_##layout##_128x96c2x1p \
  }
const Run kAllGather[2][2][kAllGatherWidthCount] = {{FC_ALLGATHER_ENTRY(bf16, n), FC_ALLGATHER_ENTRY(bf16, t)},
                                                    {FC_ALLGATHER_ENTRY(fp16, n), FC_ALLGATHER_ENTRY(fp16, t)}};
#undef FC_ALLGATHER_ENTRY
const Run kScatterChain[2][2] = {{runScatterChainGemm_bf16_n_128x128c2x1p, runScatterChainGemm_bf16_t_128x128c2x1p},
                                 {runScatterChainGemm_fp16_n_128x128c2x1p, runScatterChainGemm_fp16_t_128x128c2x1p}};

template <size_t kConfigs>
fcResult_t dispatch(const Run (&table)[2][2][kConfigs], const EngineGemm& g, size_t config, cudaStream_t stream) {
  return table[g.datatype == fcFloat16][g.transB == fcOpT][config](g, stream);
}

}  // namespace

bool engineSupports(const EngineGemm& g) {
  if (g.datatype != fcBfloat16 && g.datatype != fcFloat16) return false;
  if (g.M > INT_MAX || g.N > INT_MAX || g.K > INT_MAX) return false;
  // TMA: every row starts 16-byte aligned (8 elements), and so do the bases.
  const uintptr_t bases = reinterpret_cast<uintptr_t>(g.A) | reinterpret_cast<uintptr_t>(g.B) |
                          reinterpret_cast<uintptr_t>(g.D) | reinterpret_cast<uintptr_t>(g.ownA);
  return g.K % 8 == 0 && g.N % 8 == 0 && bases % 16 == 0;
}

fcResult_t launchAllGatherGemm(const EngineGemm& g, cudaStream_t stream) {
  const int width = g.tileN != 0 ? g.tileN : tuning::engineTileN(g.M, g.N, g.K, g.smCount);
  FC_TRACE("GEMM engine, all-gather: M %zu N %zu K %zu: 128 x %d %s", g.M, g.N, g.K, width,
           width > 128 ? "cooperative" : "ping-pong");
  for (int i = 0; i < kAllGatherWidthCount; ++i)
    if (kAllGatherWidths[i] == width) return dispatch(kAllGather, g, size_t(i), stream);
  return setError(fcInternalError, "the all-gather engine has no 128 x %d tiles", width);
}

namespace {

// GEMM + reduce-scatter: the caller's tile shape, else tuning::scatterEngineSmallTiles
// (also where K is short).
bool scatterSmallTiles(const EngineGemm& g) {
  return g.tileN != 0 ? g.tileN == 128 : tuning::scatterEngineSmallTiles(g.M, g.N, g.K, g.smCount);
}

}  // namespace

size_t scatterGemmPieceTiles(const EngineGemm& g, int64_t piece) {
  const size_t tileN = scatterSmallTiles(g) ? 128 : 256;
  const int64_t first = piece * g.signal.pieceRows;
  const int64_t rows = std::min(g.signal.pieceRows, g.signal.blockRows - first);
  return rows <= 0 ? 0 : size_t(rows / 128) * ((g.N + tileN - 1) / tileN);
}

bool scatterGemmSupports(const EngineGemm& g) {
  const EpilogueSource& s = g.source;
  const bool sourceOk = s.C == nullptr || (reinterpret_cast<uintptr_t>(s.C) % 16 == 0 &&
                                           reinterpret_cast<uintptr_t>(s.D) % 16 == 0 &&
                                           reinterpret_cast<uintptr_t>(s.gather) % 16 == 0 && s.blockRows > 0 &&
                                           s.firstRow % 128 == 0 && s.blockRows % 128 == 0 &&
                                           s.pieceRows > 0 && s.pieceRows % 128 == 0);
  const int64_t b = g.signal.blockRows, p = g.signal.pieceRows;
  // The chain: its source, 128 x 128 tiles, fp32 rows of 16 bytes, no gather.
  const bool chainOk = !g.chain || (s.C != nullptr && g.tileN == 128 && g.N % 4 == 0 && s.gather == nullptr);
  return engineSupports(g) && sourceOk && chainOk && (s.gather == nullptr || s.C != nullptr) && b > 0 &&
         b % 128 == 0 && p > 0 && p % 128 == 0 && (b + p - 1) / p <= kMaxPieces;
}

fcResult_t launchMatmulScatterGemm(const EngineGemm& g, cudaStream_t stream) {
  const bool small = scatterSmallTiles(g);
  const bool gather = g.source.gather != nullptr;
  FC_TRACE("GEMM engine, reduce-scatter%s: M %zu N %zu K %zu: %s", g.chain ? " (chain)" : gather ? " + gather" : "",
           g.M, g.N, g.K, small ? "128 x 128 ping-pong" : "128 x 256 cooperative");
  if (g.chain) {
    if (!small) return setError(fcInternalError, "the GEMM engine's chain runs on 128 x 128 tiles only");
    return kScatterChain[g.datatype == fcFloat16][g.transB == fcOpT](g, stream);
  }
  return dispatch(gather ? kScatterGather : kScatter, g, small, stream);
}

}  // namespace fc::engine
