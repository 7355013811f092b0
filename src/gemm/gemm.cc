#include "gemm/gemm.h"

#include <cublasLt.h>

#include <memory>

#include "core/log.h"
#include "core/result.h"

namespace fc {
namespace {

// cuBLASLt's own workspace: 32 MiB is what cuBLAS recommends on Hopper.
constexpr size_t kWorkspaceBytes = 32u << 20;

#define FC_LT_CHECK(call)                                                                     \
  do {                                                                                        \
    cublasStatus_t st_ = (call);                                                              \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                         \
      return ::fc::setError(fcUnhandledCudaError, "%s:%d: %s failed: cuBLASLt status %d (%s)", \
                            __FILE__, __LINE__, #call, int(st_), cublasLtGetStatusName(st_)); \
  } while (0)

// The largest power of two (up to 256) that divides the address.
int alignmentOf(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int al = 1;
  while (al < 256 && (a % uintptr_t(al * 2)) == 0) al *= 2;
  return al;
}

}  // namespace

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Gemm::~Gemm() {
  for (auto& kv : plans_) delete kv.second;
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
  if (workspace_) cudaFree(workspace_);
}

fcResult_t Gemm::init() {
  cublasLtHandle_t h = nullptr;
  FC_LT_CHECK(cublasLtCreate(&h));
  handle_ = h;
  FC_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  workspaceBytes_ = kWorkspaceBytes;
  return fcSuccess;
}

// key: rows, N, K, transB, dtype, alignment of A, B, C, fp32 output.
fcResult_t Gemm::plan(const Key& key, Plan** out) {
  if (auto it = plans_.find(key); it != plans_.end()) {
    *out = it->second;
    return fcSuccess;
  }
  const auto [rows, N, K, transB, dt, alA, alB, alC, fp32Out] = key;
  const cudaDataType_t type = dt == fcBfloat16 ? CUDA_R_16BF : CUDA_R_16F;
  auto p = std::make_unique<Plan>();
  // Column-major view: m = N, n = rows, k = K. The "A" operand is B, the "B" operand is A.
  FC_LT_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t opB = transB == fcOpT ? CUBLAS_OP_T : CUBLAS_OP_N, opN = CUBLAS_OP_N;
  FC_LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opB, sizeof opB));
  FC_LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN));
  // B row-major [K, N] is column-major [N, K] (ld N); B row-major [N, K] is
  // column-major [K, N] (ld K), used transposed.
  if (transB == fcOpT)
    FC_LT_CHECK(cublasLtMatrixLayoutCreate(&p->a, type, K, N, int64_t(K)));
  else
    FC_LT_CHECK(cublasLtMatrixLayoutCreate(&p->a, type, N, K, int64_t(N)));
  FC_LT_CHECK(cublasLtMatrixLayoutCreate(&p->b, type, K, rows, int64_t(K)));
  FC_LT_CHECK(cublasLtMatrixLayoutCreate(&p->c, fp32Out ? CUDA_R_32F : type, N, rows, int64_t(N)));

  cublasLtMatmulPreference_t pref = nullptr;
  FC_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint32_t a32 = uint32_t(alB), b32 = uint32_t(alA), c32 = uint32_t(alC);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes_,
                                       sizeof workspaceBytes_);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a32, sizeof a32);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &b32, sizeof b32);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &c32, sizeof c32);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &c32, sizeof c32);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p->desc,
                                                           p->a, p->b, p->c, p->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    return setError(fcNotSupported,
                    "cuBLASLt has no algorithm for C[%zu, %zu] = A[%zu, %zu] x %s (alignments %d/%d/%d "
                    "bytes): %s",
                    rows, N, rows, K, transB == fcOpT ? "B^T" : "B", alA, alB, alC,
                    cublasLtGetStatusName(st));
  p->algo = result.algo;
  FC_TRACE("gemm plan: C[%zu, %zu] = A[%zu, %zu] x %s, dtype %d", rows, N, rows, K,
           transB == fcOpT ? "B^T" : "B", dt);
  *out = p.get();
  plans_[key] = p.release();
  return fcSuccess;
}

fcResult_t Gemm::matmul(const void* A, size_t rows, const void* B, void* C, size_t N, size_t K,
                        fcOperation_t transB, fcDataType_t datatype, cudaStream_t stream, bool fp32Out) {
  Plan* p = nullptr;
  FC_CHECK(plan(Key{rows, N, K, int(transB), int(datatype), alignmentOf(A), alignmentOf(B), alignmentOf(C),
                    fp32Out},
                &p));
  const float alpha = 1.f, beta = 0.f;
  FC_LT_CHECK(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p->desc, &alpha, B, p->a, A, p->b, &beta,
                             C, p->c, C, p->c, &p->algo, workspace_, workspaceBytes_, stream));
  return fcSuccess;
}

}  // namespace fc
