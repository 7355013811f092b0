// One instantiation of the decode GEMM: fp16, tiles 64 x 16 x 256 (swapped_gemm.cuh).
#include "gemm/decode/swapped_gemm.cuh"

namespace fc::decode {

fcResult_t prepareDecodeGemm_fp16_16x256() { return SwappedGemm<cutlass::half_t, 16, 256>::prepare(); }
fcResult_t runDecodeGemm_fp16_16x256(const DecodeGemm& g, cudaStream_t stream) {
  return SwappedGemm<cutlass::half_t, 16, 256>::run(g, stream);
}

}  // namespace fc::decode
