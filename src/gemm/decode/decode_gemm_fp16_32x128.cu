// One instantiation of the decode GEMM: fp16, tiles 64 x 32 x 128 (swapped_gemm.cuh).
#include "gemm/decode/swapped_gemm.cuh"

namespace fc::decode {

fcResult_t prepareDecodeGemm_fp16_32x128() { return SwappedGemm<cutlass::half_t, 32, 128>::prepare(); }
fcResult_t runDecodeGemm_fp16_32x128(const DecodeGemm& g, cudaStream_t stream) {
  return SwappedGemm<cutlass::half_t, 32, 128>::run(g, stream);
}

}  // namespace fc::decode
