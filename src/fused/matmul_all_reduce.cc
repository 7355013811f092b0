// fcMatmulAllReduce's automatic choice between its two paths (src/api/
// api_matmul_all_reduce.cc runs them; docs/design.md, "GEMM + all-reduce").
#include "fused/fused.h"

namespace fc {

// Not measured yet on 2 GPUs: every shape takes the GEMM and then fcAllReduce's
// algorithm (exactly what the op must never be slower than) until fc-bench mmar has
// timed the reduce-scatter + all-gather path beside it (FC_MMAR_ALGO=fused forces it).
// One row: on 2 H100s (fc-bench mmar, 2026-11-26) the kernel took 7.05 / 24.67 us at
// 1 x 4096 x 2048 / 7168 where cuBLAS + the Lamport all-reduce took 8.83 / 27.08 (the
// GEMM alone 6.15 / 24.56). From 2 rows its CUDA-core FMAs fall behind cuBLAS's tensor
// cores (2 x 4096 x 2048: 8.72 against 8.08; 4 rows 11.99 against 8.02).
bool matmulAllReduceGemvPays(int nranks, size_t M, size_t N, size_t K) {
  (void)nranks, (void)N, (void)K;
  return M == 1;
}

bool matmulAllReduceSplitsRows(int nranks, size_t M, size_t N, size_t K, int smCount) {
  (void)nranks, (void)M, (void)N, (void)K, (void)smCount;
  return false;
}

}  // namespace fc
