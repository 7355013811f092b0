#include "gemm/decode/decode_gemm.h"

#include <climits>
#include <cstdint>

#include "core/log.h"
#include "core/result.h"

namespace fc::decode {

// The instantiations (decode_gemm_<type>_<tile>.cu), in a table [fp16][32 tokens].
#define FC_DECODE_DECLARE(type, tile)                                        \
  fcResult_t prepareDecodeGemm_##type##_##tile();                            \
  fcResult_t runDecodeGemm_##type##_##tile(const DecodeGemm&, cudaStream_t);
FC_DECODE_DECLARE(bf16, 16x256)
FC_DECODE_DECLARE(bf16, 32x128)
FC_DECODE_DECLARE(fp16, 16x256)
FC_DECODE_DECLARE(fp16, 32x128)
#undef FC_DECODE_DECLARE

namespace {

using Run = fcResult_t (*)(const DecodeGemm&, cudaStream_t);
const Run kRun[2][2] = {{runDecodeGemm_bf16_16x256, runDecodeGemm_bf16_32x128},
                        {runDecodeGemm_fp16_16x256, runDecodeGemm_fp16_32x128}};

}  // namespace

bool decodeGemmSupports(const DecodeGemm& g) {
  if (g.datatype != fcBfloat16 && g.datatype != fcFloat16) return false;
  if (g.tokensPerTile != 16 && g.tokensPerTile != 32) return false;
  if (g.rows == 0 || g.rows > INT_MAX || g.N > INT_MAX || g.K > INT_MAX || g.smCount <= 0) return false;
  const uintptr_t bases =
      reinterpret_cast<uintptr_t>(g.A) | reinterpret_cast<uintptr_t>(g.B) | reinterpret_cast<uintptr_t>(g.D);
  return g.K % 8 == 0 && g.N % 8 == 0 && bases % 16 == 0;
}

fcResult_t prepareDecodeGemms() {
  FC_CHECK(prepareDecodeGemm_bf16_16x256());
  FC_CHECK(prepareDecodeGemm_bf16_32x128());
  FC_CHECK(prepareDecodeGemm_fp16_16x256());
  return prepareDecodeGemm_fp16_32x128();
}

fcResult_t launchDecodeGemm(const DecodeGemm& g, cudaStream_t stream) {
  if (!decodeGemmSupports(g))
    return setError(fcInternalError, "the decode GEMM cannot take rows, N, K = %zu, %zu, %zu", g.rows, g.N, g.K);
  FC_TRACE("decode GEMM: rows %zu N %zu K %zu: 64 x %d tiles", g.rows, g.N, g.K, g.tokensPerTile);
  return kRun[g.datatype == fcFloat16][g.tokensPerTile == 32](g, stream);
}

}  // namespace fc::decode
