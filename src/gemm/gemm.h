// Row-major GEMMs through cuBLASLt, the way the fused ops need them:
//   D[rows, N] = A[rows, K] x op(B) (+ C),  op(B) = B [K, N] (fcOpN) or B^T, B [N, K]
// (fcOpT), all row-major and contiguous (lda = K, ldc = ldd = N), bf16 or fp16 in,
// fp32 accumulation. cuBLASLt is column-major, so we ask it for D^T = op(B)^T x A^T:
// a row-major matrix is the column-major matrix of its transpose, with the same
// pointer and leading dimension. A block of rows of A and D is then just a pointer
// offset and a smaller n, which is how the fused ops cut their GEMMs.
//
// One Gemm per channel of a communicator (a channel carries one stream's work, so
// two streams never share a cuBLASLt workspace): a handle, a workspace, and the
// heuristic's choice cached per problem (shape, types, alignments, batch).
//
// The decode GEMM: a plain product (input-type D, no C, no batch) of few rows against an
// nn.Linear weight (fcOpT) runs CUTLASS's kernel of src/gemm/decode instead of cuBLASLt
// where tuning::decodeGemmTokens says it is faster (long K), unless init was told not to
// (FC_DECODE_GEMM=0). Every rank of a communicator takes the same choice for a shape.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "fusedcomm.h"

namespace fc {

// One GEMM: D = A x op(B) [+ C], optionally a strided batch sharing B.
struct MatmulOp {
  const void* A;           // [rows, K], datatype
  size_t rows;
  const void* B;           // [K, N] or [N, K], datatype
  size_t N, K;
  fcOperation_t transB;
  fcDataType_t datatype;   // of A and B; of D unless dFp32
  void* D;                 // [rows, N]; may lie in a peer's memory
  bool dFp32 = false;      // D in fp32 (an unrounded partial product)
  const float* C = nullptr;  // when set: D = A x op(B) + C, C fp32 [rows, N] (may equal D)
  int batch = 1;           // batch i: A + i*strideA, D + i*strideD (elements); B, C shared
  size_t strideA = 0, strideD = 0;
};

class Gemm {
 public:
  Gemm() = default;
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  ~Gemm();

  // Create the handle and the workspace on the current device; with decodeGemms, prepare
  // the decode GEMM's kernels there too.
  fcResult_t init(bool decodeGemms = true);

  // Enqueue `op` on `stream`. rows, N, K > 0. fcNotSupported when cuBLASLt has no
  // algorithm for it.
  fcResult_t matmul(const MatmulOp& op, cudaStream_t stream);

  // The SMs the decode GEMM runs on (src/gemm/decode), or 0 where it never runs
  // (FC_DECODE_GEMM=0, a GPU other than sm_90).
  int decodeSms() const { return smCount_; }

  // D = A x op(B), D of the input type (or fp32 with fp32Out): the common case.
  fcResult_t matmul(const void* A, size_t rows, const void* B, void* D, size_t N, size_t K,
                    fcOperation_t transB, fcDataType_t datatype, cudaStream_t stream, bool fp32Out = false);

 private:
  struct Plan;
  // rows, N, K, transB, dtype, alignments of A, B, C, D, dFp32, has C, batch, strideA, strideD
  using Key = std::tuple<size_t, size_t, size_t, int, int, int, int, int, int, bool, bool, int, size_t, size_t>;
  static Key keyOf(const MatmulOp& op);
  // *out = NULL (and no error) when cuBLASLt has no algorithm; failures are cached too.
  fcResult_t plan(const Key& key, Plan** out);

  void* handle_ = nullptr;  // cublasLtHandle_t
  int smCount_ = 0;         // of the device, when the decode GEMM may run; else 0
  void* workspace_ = nullptr;
  size_t workspaceBytes_ = 0;
  std::map<Key, Plan*> plans_;
};

}  // namespace fc
