#include "gemm/engine/engine.h"

#include <algorithm>
#include <climits>

#include "core/log.h"
#include "core/result.h"

namespace fc::engine {

// The instantiations: all-gather + GEMM (allgather_gemm_<type>_<B layout>_<config>.cu)
// and GEMM + reduce-scatter (scatter_gemm_...), each in two configurations ('p':
// ping-pong), in a table [fp16][B^T][128 x 128 tiles].
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
#undef FC_ENGINE_DECLARE_ALL
#undef FC_ENGINE_DECLARE

namespace {

using Run = fcResult_t (*)(const EngineGemm&, cudaStream_t);
#define FC_ENGINE_ENTRY(kind, type, layout) \
  { run##kind##Gemm_##type##_##layout##_128x256c2x1, run##kind##Gemm_##type##_##layout##_128x128c2x1p }
#define FC_ENGINE_TABLE(kind)                                           \
  {{FC_ENGINE_ENTRY(kind, bf16, n), FC_ENGINE_ENTRY(kind, bf16, t)},  \
   {FC_ENGINE_ENTRY(kind, fp16, n), FC_ENGINE_ENTRY(kind, fp16, t)}}
const Run kAllGather[2][2][2] = FC_ENGINE_TABLE(AllGather);
const Run kScatter[2][2][2] = FC_ENGINE_TABLE(Scatter);
#undef FC_ENGINE_TABLE
#undef FC_ENGINE_ENTRY

fcResult_t dispatch(const Run (&table)[2][2][2], const EngineGemm& g, bool small, cudaStream_t stream) {
  return table[g.datatype == fcFloat16][g.transB == fcOpT][small](g, stream);
}

// 128 x 128 tiles (ping-pong) when they need fewer waves of the GPU than 128 x 256
// ones (cooperative), counted in the time of a 128 x 256 tile (two of the smaller
// ones), by more than 5 %: on small problems they keep more SMs busy, on large ones
// the bigger tiles reuse more (measured interleaved on one H200, docs/perf-log.md:
// 512 x 3072 x 4096 in 24.4 instead of 43.0 us, 512 x 27648 x 5120 in 196 instead of
// 217; but 512 x 14336 x 4096, a tie in waves, in 84.8 with the bigger tiles against
// 90.0). The ping-pong schedule's 128 x 128 tiles ran up to 14 % faster than the
// cooperative ones (most where K is short) and never more than 3 % slower (within
// the runs' noise). Also where B is far beyond L2 (over 128 MiB): 2048 and 8192 x
// 27648 x 5120 (B 270 MiB) in 1.00 and 1.01x cuBLASLt's time against 1.05 and 1.08,
// 4096 x 6656 x 16384 (208 MiB) 0.99 against 1.04; at 112 MiB (x 14336 x 4096,
// x 7168 x 8192) the two tie.
bool smallTiles(const EngineGemm& g) {
  if (g.N * g.K * 2 > (size_t(128) << 20)) return true;
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
                          reinterpret_cast<uintptr_t>(g.D) | reinterpret_cast<uintptr_t>(g.ownA);
  return g.K % 8 == 0 && g.N % 8 == 0 && bases % 16 == 0;
}

fcResult_t launchAllGatherGemm(const EngineGemm& g, cudaStream_t stream) {
  return dispatch(kAllGather, g, smallTiles(g), stream);
}

namespace {

// GEMM + reduce-scatter: the 128 x 128 ping-pong tiles where they need fewer waves
// (as above), or where K is short: a tile's mainloop is then not much longer than its
// epilogue, which the ping-pong schedule runs under the other warp group's mainloop
// (one H200, docs/perf-log.md: K = 1024 at 2048 and 8192 rows, N = 4096, in 0.99 and
// 0.96x cuBLASLt's time against 1.08 and 1.05 with the 128 x 256 tiles).
bool scatterSmallTiles(const EngineGemm& g) { return smallTiles(g) || g.K <= 2048; }

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
                                           reinterpret_cast<uintptr_t>(s.D) % 16 == 0 && s.blockRows > 0 &&
                                           s.firstRow % 128 == 0 && s.blockRows % 128 == 0 &&
                                           s.pieceRows > 0 && s.pieceRows % 128 == 0);
  const int64_t b = g.signal.blockRows, p = g.signal.pieceRows;
  return engineSupports(g) && sourceOk && b > 0 && b % 128 == 0 && p > 0 && p % 128 == 0 &&
         (b + p - 1) / p <= kMaxPieces;
}

fcResult_t launchMatmulScatterGemm(const EngineGemm& g, cudaStream_t stream) {
  const bool small = scatterSmallTiles(g);
  FC_TRACE("GEMM engine, reduce-scatter: M %zu N %zu K %zu: %s", g.M, g.N, g.K,
           small ? "128 x 128 ping-pong" : "128 x 256 cooperative");
  return dispatch(kScatter, g, small, stream);
}

}  // namespace fc::engine
