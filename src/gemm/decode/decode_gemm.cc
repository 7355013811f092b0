#include "gemm/decode/decode_gemm.h"

#include <climits>
#include <cstdint>
#include <initializer_list>

#include "core/log.h"
#include "core/result.h"

namespace fc::decode {

// The instantiations (decode_gemm_<type>_<tile>.cu; the decode engine's pushing kernels
// decode_gemm_push_<type>_<tile>.cu, which also come in the wide-token tiles 64 x 64 and
// 64 x 128), in a table [push][fp16][tile: 16, 32, 64, 128 tokens] (NULL: not built).
#define FC_DECODE_DECLARE(kind, type, tile)                                  \
  fcResult_t prepare##kind##_##type##_##tile();                            \
  fcResult_t run##kind##_##type##_##tile(const DecodeGemm&, cudaStream_t);
#define FC_DECODE_DECLARE_ALL(kind)      \
  FC_DECODE_DECLARE(kind, bf16, 16x256) \
  FC_DECODE_DECLARE(kind, bf16, 32x128) \
  FC_DECODE_DECLARE(kind, fp16, 16x256) \
  FC_DECODE_DECLARE(kind, fp16, 32x128)
FC_DECODE_DECLARE_ALL(DecodeGemm)
FC_DECODE_DECLARE_ALL(DecodeGemmPush)
FC_DECODE_DECLARE(DecodeGemmPush, bf16, 64x128)
FC_DECODE_DECLARE(DecodeGemmPush, bf16, 128x64)
FC_DECODE_DECLARE(DecodeGemmPush, fp16, 64x128)
FC_DECODE_DECLARE(DecodeGemmPush, fp16, 128x64)
#undef FC_DECODE_DECLARE_ALL
#undef FC_DECODE_DECLARE

namespace {

using Run = fcResult_t (*)(const DecodeGemm&, cudaStream_t);
const Run kRun[2][2][4] = {
    {{runDecodeGemm_bf16_16x256, runDecodeGemm_bf16_32x128, nullptr, nullptr},
     {runDecodeGemm_fp16_16x256, runDecodeGemm_fp16_32x128, nullptr, nullptr}},
    {{runDecodeGemmPush_bf16_16x256, runDecodeGemmPush_bf16_32x128, runDecodeGemmPush_bf16_64x128,
      runDecodeGemmPush_bf16_128x64},
     {runDecodeGemmPush_fp16_16x256, runDecodeGemmPush_fp16_32x128, runDecodeGemmPush_fp16_64x128,
      runDecodeGemmPush_fp16_128x64}}};

// The table's tile index of a token count per tile, or -1.
int tileIndex(int tokensPerTile) {
  return tokensPerTile == 16 ? 0 : tokensPerTile == 32 ? 1 : tokensPerTile == 64 ? 2 : tokensPerTile == 128 ? 3 : -1;
}

Run runOf(const DecodeGemm& g) {
  const int tile = tileIndex(g.tokensPerTile);
  if (tile < 0 || (g.datatype != fcBfloat16 && g.datatype != fcFloat16)) return nullptr;
  return kRun[g.push[0] != nullptr][g.datatype == fcFloat16][tile];
}

}  // namespace

bool decodeGemmSupports(const DecodeGemm& g) {
  if (runOf(g) == nullptr) return false;
  if (g.rows == 0 || g.rows > INT_MAX || g.N > INT_MAX || g.K > INT_MAX || g.smCount <= 0) return false;
  const uintptr_t bases =
      reinterpret_cast<uintptr_t>(g.A) | reinterpret_cast<uintptr_t>(g.B) | reinterpret_cast<uintptr_t>(g.D);
  return g.K % 8 == 0 && g.N % 8 == 0 && bases % 16 == 0;
}

fcResult_t prepareDecodeGemms() {
  for (auto prepare :
       {prepareDecodeGemm_bf16_16x256, prepareDecodeGemm_bf16_32x128, prepareDecodeGemm_fp16_16x256,
        prepareDecodeGemm_fp16_32x128, prepareDecodeGemmPush_bf16_16x256, prepareDecodeGemmPush_bf16_32x128,
        prepareDecodeGemmPush_fp16_16x256, prepareDecodeGemmPush_fp16_32x128, prepareDecodeGemmPush_bf16_64x128,
        prepareDecodeGemmPush_bf16_128x64, prepareDecodeGemmPush_fp16_64x128, prepareDecodeGemmPush_fp16_128x64})
    FC_CHECK(prepare());
  return fcSuccess;
}

fcResult_t launchDecodeGemm(const DecodeGemm& g, cudaStream_t stream) {
  if (!decodeGemmSupports(g))
    return setError(fcInternalError, "the decode GEMM cannot take rows, N, K = %zu, %zu, %zu", g.rows, g.N, g.K);
  const bool push = g.push[0] != nullptr;
  FC_TRACE("decode GEMM%s: rows %zu N %zu K %zu: 64 x %d tiles", push ? " (pushing)" : "", g.rows, g.N, g.K,
           g.tokensPerTile);
  return runOf(g)(g, stream);
}

}  // namespace fc::decode
