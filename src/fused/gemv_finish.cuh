// The last phase of fcMatmulAllReduce's decode kernels (gemv_all_reduce.cu, both
// forms): a CTA's packs of the result, each summed over the ranks from the peers'
// Lamport pushes and its own partial, in rank order (the same bits on every rank), and
// stored rounded once - or, for the norm forms, unrounded in fp32 for the residual +
// RMSNorm kernel that follows (PDL), which adds the residual and rounds once.
//
// (The norm inside this kernel - the CTAs' row sums of squares meeting at a grid
// barrier - was built and measured, 23bbc21 / bad92d3, and lost to the kernel after
// it by 1.5-2.5 us: docs/perf-log.md, 2026-11-26, twentieth session.)
#pragma once

#include "collectives/lamport.cuh"

namespace fc::gemv {

using dev::Pack;

// The CTA's packs i in [0, count) (own[i]: this rank's partial of pack i; locate(i, m,
// part) gives its row and 8-column part, false where there is none), by the data
// threads (threadIdx.x < dataThreads). out: [M, N] in T, or (fp32Out) in fp32. Returns
// false where a wait gave up (its error recorded): the thread stops.
template <typename T, int NR, typename Locate>
__device__ __forceinline__ bool finishPacks(int channel, const dev::LamportRun<dev::LamportKind::Rows>& run,
                                            const Pack* own, int count, int dataThreads, int N, void* out,
                                            bool fp32Out, Locate locate) {
  constexpr int E = dev::PackTraits<T>::kElems;
  const int parts = N / E;
  for (int i = int(threadIdx.x); i < count; i += dataThreads) {
    int m, part;
    if (!locate(i, m, part)) continue;
    const size_t pk = size_t(m) * size_t(parts) + size_t(part);
    float acc[E];
    if (!run.template sumInRankOrder<T, NR>(Op::MatmulAllReduce, channel, 0, pk, own[i], acc)) return false;
    run.clearRead(pk);
    if (fp32Out) {
      float4* o = reinterpret_cast<float4*>(static_cast<float*>(out) + pk * E);
      o[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      o[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    } else {
      *reinterpret_cast<Pack*>(static_cast<T*>(out) + pk * E) = dev::toPack<T>(acc);
    }
  }
  return true;
}

}  // namespace fc::gemv
