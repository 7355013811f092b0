// fcMatmulAllReduce's automatic choices among its paths (src/api/
// api_matmul_all_reduce.cc runs them; docs/design.md, "GEMM + all-reduce"). Both are
// functions of the world size and the shape only, the same on every rank.
#include "fused/fused.h"

namespace fc {

// One row with K up to 8192: on 2 H100s (fc-bench mmar, 2026-11-26,
// docs/results/2026-11-26-h100x2-mmar) the kernel took 6.83 / 24.89 / 10.00 us at
// 1 x 4096 x 2048, 1 x 4096 x 7168 and 1 x 5120 x 2560 where the GEMM, then the Lamport
// all-reduce took 9.63 / 27.91 / 11.72 (the GEMM alone 6.09 / 24.30 / 7.90); at K =
// 13824 it read B slower than cuBLAS (60.73 against 56.89). From 2 rows its CUDA-core
// FMAs fall behind cuBLAS's tensor cores (2 x 4096 x 2048: 8.71 against 8.12; 4 rows
// 11.91 against 8.00).
bool matmulAllReduceGemvPays(int nranks, size_t M, size_t N, size_t K) {
  (void)nranks, (void)N;
  return M == 1 && K <= 8192;
}

// At 2 ranks from 4096 rows per rank: on 2 H100s (fc-bench mmar with FC_MMAR_ALGO=fused,
// 2026-11-26) fcMatmulReduceScatter's path, then an all-gather took 358.6 / 811.5 /
// 509.1 / 1727.9 us at 8192 rows of the four layers (N x K 4096 x 2048, 4096 x 7168,
// 5120 x 2560, 5120 x 13824) where the GEMM, then the all-reduce took 389.0 / 822.7 /
// 535.7 / 1835.0; at 2048 rows it was behind (114.6 against 102.2 at 4096 x 2048). The
// norm forms never take it (the caller excludes them): all-gathering the sums and
// normalising every row locally was behind at every shape (485.0 against 405.9 us at
// 8192 x 4096 x 2048).
bool matmulAllReduceSplitsRows(int nranks, size_t M, size_t N, size_t K, int smCount) {
  (void)N, (void)K, (void)smCount;
  return nranks == 2 && M / 2 >= 4096;
}

}  // namespace fc
