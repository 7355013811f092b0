// Row-major GEMMs through cuBLASLt, the way the fused ops need them:
//   C[rows, N] = A[rows, K] x op(B),  op(B) = B [K, N] (fcOpN) or B^T, B [N, K] (fcOpT),
// all row-major and contiguous (lda = K, ldc = N), bf16 or fp16 in and out, fp32
// accumulation. cuBLASLt is column-major, so we ask it for C^T = op(B)^T x A^T: a
// row-major matrix is the column-major matrix of its transpose, with the same
// pointer and leading dimension. A block of rows of A and C is then just a pointer
// offset and a smaller n, which is how the fused ops cut their GEMMs.
//
// One Gemm per communicator: a cuBLASLt handle, a workspace, and the heuristic's
// choice cached per (rows, N, K, transB, dtype, pointer alignments).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "fusedcomm.h"

namespace fc {

class Gemm {
 public:
  Gemm() = default;
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  ~Gemm();

  // Create the handle and the workspace on the current device.
  fcResult_t init();

  // Enqueue C = A x op(B) on `stream` (see above). rows, N, K > 0. With fp32Out, C
  // is fp32 (the unrounded partial product that a reduction sums before rounding).
  fcResult_t matmul(const void* A, size_t rows, const void* B, void* C, size_t N, size_t K,
                    fcOperation_t transB, fcDataType_t datatype, cudaStream_t stream, bool fp32Out = false);

 private:
  struct Plan;
  using Key = std::tuple<size_t, size_t, size_t, int, int, int, int, int, bool>;
  fcResult_t plan(const Key& key, Plan** out);

  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  size_t workspaceBytes_ = 0;
  std::map<Key, Plan*> plans_;
};

}  // namespace fc
