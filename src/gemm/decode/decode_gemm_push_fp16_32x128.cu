// One instantiation of the decode engine's GEMM: fp16, tiles 64 x 32 x 128, each tile also
// pushed into the peer's Lamport Rows slot (swapped_gemm.cuh, push_epilogue.cuh).
#include "gemm/decode/swapped_gemm.cuh"

namespace fc::decode {

fcResult_t prepareDecodeGemmPush_fp16_32x128() { return SwappedGemm<cutlass::half_t, 32, 128, true>::prepare(); }
fcResult_t runDecodeGemmPush_fp16_32x128(const DecodeGemm& g, cudaStream_t stream) {
  return SwappedGemm<cutlass::half_t, 32, 128, true>::run(g, stream);
}

}  // namespace fc::decode
