// fcMatmulAllReduce's automatic choice between its two paths (src/api/
// api_matmul_all_reduce.cc runs them; docs/design.md, "GEMM + all-reduce").
#include "fused/fused.h"

namespace fc {

// Not measured yet on 2 GPUs: every shape takes the GEMM and then fcAllReduce's
// algorithm (exactly what the op must never be slower than) until fc-bench mmar has
// timed the reduce-scatter + all-gather path beside it (FC_MMAR_ALGO=fused forces it).
// Every shape it takes (up to kGemvAllReduceMaxRows rows): not yet timed beside cuBLAS +
// the Lamport all-reduce on 2 GPUs (fc-bench mmar with FC_MMAR_ALGO=unfused does).
bool matmulAllReduceGemvPays(int nranks, size_t M, size_t N, size_t K) {
  (void)nranks, (void)M, (void)N, (void)K;
  return true;
}

bool matmulAllReduceSplitsRows(int nranks, size_t M, size_t N, size_t K, int smCount) {
  (void)nranks, (void)M, (void)N, (void)K, (void)smCount;
  return false;
}

}  // namespace fc
