#include "gemm/gemm.h"

#include <cublasLt.h>

#include <memory>

#include "core/log.h"
#include "core/result.h"
#include "gemm/decode/decode_gemm.h"
#include "tuning/tuning.h"

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
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    for (cublasLtMatrixLayout_t l : {a, b, c, d})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Gemm::~Gemm() {
  for (auto& kv : plans_) delete kv.second;
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
  if (workspace_) cudaFree(workspace_);
}

fcResult_t Gemm::init(bool decodeGemms) {
  cublasLtHandle_t h = nullptr;
  FC_LT_CHECK(cublasLtCreate(&h));
  handle_ = h;
  FC_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  workspaceBytes_ = kWorkspaceBytes;
  if (decodeGemms) {
    int device = 0, major = 0, sms = 0;
    FC_CUDA_CHECK(cudaGetDevice(&device));
    FC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    FC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    // The kernels are sm_90a's (Hopper) only: elsewhere cuBLASLt runs every product.
    if (major == 9) {
      FC_CHECK(decode::prepareDecodeGemms());
      smCount_ = sms;
    }
  }
  return fcSuccess;
}

Gemm::Key Gemm::keyOf(const MatmulOp& op) {
  return Key{op.rows,
             op.N,
             op.K,
             int(op.transB),
             int(op.datatype),
             alignmentOf(op.A),
             alignmentOf(op.B),
             op.C ? alignmentOf(op.C) : 256,
             alignmentOf(op.D),
             op.dFp32,
             op.C != nullptr,
             op.batch,
             op.batch > 1 ? op.strideA : 0,
             op.batch > 1 ? op.strideD : 0};
}

namespace {

fcResult_t layout(cublasLtMatrixLayout_t* l, cudaDataType_t type, size_t rows, size_t cols, size_t ld, int batch,
                  size_t stride) {
  FC_LT_CHECK(cublasLtMatrixLayoutCreate(l, type, rows, cols, int64_t(ld)));
  if (batch > 1) {
    const int32_t count = batch;
    const int64_t st = int64_t(stride);
    FC_LT_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    FC_LT_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st));
  }
  return fcSuccess;
}

}  // namespace

fcResult_t Gemm::plan(const Key& key, Plan** out) {
  if (auto it = plans_.find(key); it != plans_.end()) {
    *out = it->second;
    return fcSuccess;
  }
  const auto [rows, N, K, transB, dt, alA, alB, alC, alD, dFp32, hasC, batch, strideA, strideD] = key;
  const cudaDataType_t type = dt == fcBfloat16 ? CUDA_R_16BF : CUDA_R_16F;
  auto p = std::make_unique<Plan>();
  // Column-major view: m = N, n = rows, k = K. The "A" operand is B, the "B" operand is A.
  FC_LT_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t opB = transB == fcOpT ? CUBLAS_OP_T : CUBLAS_OP_N, opN = CUBLAS_OP_N;
  FC_LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opB, sizeof opB));
  FC_LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN));
  // B row-major [K, N] is column-major [N, K] (ld N); B row-major [N, K] is
  // column-major [K, N] (ld K), used transposed. A batch shares B (stride 0) and C.
  if (transB == fcOpT)
    FC_CHECK(layout(&p->a, type, K, N, K, batch, 0));
  else
    FC_CHECK(layout(&p->a, type, N, K, N, batch, 0));
  FC_CHECK(layout(&p->b, type, K, rows, K, batch, strideA));
  FC_CHECK(layout(&p->d, dFp32 ? CUDA_R_32F : type, N, rows, N, batch, strideD));
  if (hasC) FC_CHECK(layout(&p->c, CUDA_R_32F, N, rows, N, batch, 0));

  cublasLtMatmulPreference_t pref = nullptr;
  FC_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint32_t a32 = uint32_t(alB), b32 = uint32_t(alA), c32 = uint32_t(alC), d32 = uint32_t(alD);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes_,
                                       sizeof workspaceBytes_);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a32, sizeof a32);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &b32, sizeof b32);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &c32, sizeof c32);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &d32, sizeof d32);
  // Split-K only with its parts summed in fp32 (the compute type, in the workspace): the
  // in-place and output-type schemes add the parts in D's type, rounding each part
  // first - a bf16 product then is off by up to an ulp per split, against the one
  // rounding every op documents. Measured: with every scheme allowed, cuBLASLt took a
  // split-K one for [6, 40] x [40, 70] bf16 (B row-major, 140-byte rows) and about one
  // run in three of the GPU suite found one element of 420 off by one (perf-log.md,
  // the sixteenth session).
  const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;  // and none: no split-K
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p->desc, p->a,
                                                           p->b, hasC ? p->c : p->d, p->d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    FC_TRACE("gemm: no cuBLASLt algorithm for D[%zu, %zu] = A[%zu, %zu] x %s%s, batch %d: %s", rows, N, rows, K,
             transB == fcOpT ? "B^T" : "B", hasC ? " + C" : "", batch, cublasLtGetStatusName(st));
    plans_[key] = nullptr;
    *out = nullptr;
    return fcSuccess;
  }
  p->algo = result.algo;
  uint32_t splits = 1, scheme = 0;
  size_t got = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits, &got);
  cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme, &got);
  FC_TRACE("gemm plan: D[%zu, %zu] = A[%zu, %zu] x %s%s, dtype %d, batch %d: split-K %u, reduction scheme %u", rows,
           N, rows, K, transB == fcOpT ? "B^T" : "B", hasC ? " + C" : "", dt, batch, splits, scheme);
  *out = p.get();
  plans_[key] = p.release();
  return fcSuccess;
}

fcResult_t Gemm::matmul(const MatmulOp& op, cudaStream_t stream) {
  if (smCount_ > 0 && op.C == nullptr && op.batch == 1 && !op.dFp32 && op.transB == fcOpT) {
    const int tokens = tuning::decodeGemmTokens(op.rows, op.N, op.K, smCount_);
    const decode::DecodeGemm g{op.A, op.B, op.D, op.rows, op.N, op.K, op.datatype, tokens, smCount_};
    if (g.tokensPerTile > 0 && decode::decodeGemmSupports(g)) return decode::launchDecodeGemm(g, stream);
  }
  Plan* p = nullptr;
  FC_CHECK(plan(keyOf(op), &p));
  if (p == nullptr)
    return setError(fcNotSupported,
                    "cuBLASLt has no algorithm for D[%zu, %zu] = A[%zu, %zu] x %s%s (alignments %d/%d/%d "
                    "bytes, batch %d)",
                    op.rows, op.N, op.rows, op.K, op.transB == fcOpT ? "B^T" : "B", op.C ? " + C" : "",
                    alignmentOf(op.A), alignmentOf(op.B), alignmentOf(op.D), op.batch);
  const float alpha = 1.f, beta = op.C ? 1.f : 0.f;
  FC_LT_CHECK(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p->desc, &alpha, op.B, p->a, op.A, p->b, &beta,
                             op.C ? static_cast<const void*>(op.C) : op.D, op.C ? p->c : p->d, op.D, p->d, &p->algo,
                             workspace_, workspaceBytes_, stream));
  return fcSuccess;
}

fcResult_t Gemm::matmul(const void* A, size_t rows, const void* B, void* D, size_t N, size_t K,
                        fcOperation_t transB, fcDataType_t datatype, cudaStream_t stream, bool fp32Out) {
  MatmulOp op{A, rows, B, N, K, transB, datatype, D};
  op.dFp32 = fp32Out;
  return matmul(op, stream);
}

}  // namespace fc
