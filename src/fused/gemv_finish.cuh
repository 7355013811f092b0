// The last phase of fcMatmulAllReduce's decode kernels (gemv_all_reduce.cu, both
// forms): a CTA's packs of the result, each summed over the ranks from the peers'
// Lamport pushes and its own partial, in rank order (the same bits on every rank), and
// stored rounded once - or, for the norm forms, unrounded in fp32 for the residual +
// RMSNorm kernel that follows (PDL), which adds the residual and rounds once.
//
// (The norm inside this kernel - the CTAs' row sums of squares meeting at a grid
// barrier - was built and measured, 23bbc21 / bad92d3, and lost to the kernel after
// it by 1.5-2.5 us: docs/perf-log.md, 2026-11-26, twentieth session.)
//
// finishRows (FC_GEMV_NORM=rows, a measurement option until timed): the norm forms in
// the same kernel with rows owned whole, no grid barrier. Every tile's partial also goes
// into this rank's self slot as a Lamport pack (the data is its flag); CTA b owns rows
// b, b + grid, ...: it polls each pack of its row from the self slot and from every
// peer's push, sums in rank order, adds the residual, and normalises the row over the
// CTA (norm_rows.cuh's normRow, as the one-kernel all-reduce + RMSNorm does), clearing
// every pack it read.
#pragma once

#include "collectives/lamport.cuh"
#include "collectives/norm_rows.cuh"

namespace fc::gemv {

using dev::Pack;

// Where the decode kernels store: out (C, or fp32 sums for the norm kernel after them),
// or (rows) the norm forms' outputs in the same kernel.
struct Output {
  void* out;
  bool fp32Out;
  bool rows;      // finishRows: norm holds the call (tokens = M, hidden = N)
  NormCall norm;
};

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

// The norm forms with rows owned whole (see the top): every data thread of the CTA
// (threadIdx.x < dataThreads; dataBarrier 1 of them: norm_rows.cuh) calls it. Returns
// false where a wait gave up (its error recorded).
constexpr size_t kFinishRowsSmem = 2 * 32 * sizeof(float);  // its red[2][32]

template <typename T, int NR>
__device__ __forceinline__ bool finishRows(const DeviceComm& dc, int channel,
                                           const dev::LamportRun<dev::LamportKind::Rows>& run, int M, int dataThreads,
                                           const NormCall& c) {
  constexpr int E = dev::PackTraits<T>::kElems;
  __shared__ float red[2][32];
  Pack* self = dev::lamportSelfSlot(dc, channel);
  const float invScale = c.scale ? 1.f / *c.scale : 1.f;
  const size_t rowPacks = c.hidden / E;
  bool failed = false;
  int parity = 0;
  for (int row = int(blockIdx.x); row < M; row += int(gridDim.x), parity ^= 1) {
    auto sum = [&](size_t pk, float(&acc)[E]) {
      Pack mine = dev::loadVolatilePack(self + pk);
      if (!dev::pollPack(dc, Op::MatmulAllReduce, channel, run.buf, self + pk, mine, dc.rank)) return false;
      self[pk] = Pack{kLamportEmpty, kLamportEmpty, kLamportEmpty, kLamportEmpty};  // read: cleared
      if (!run.template sumInRankOrder<T, NR>(Op::MatmulAllReduce, channel, 0, pk, mine, acc)) return false;
      run.clearRead(pk);
      return true;
    };
    auto total = [&](float ss, bool&) { return norm::rowSum(ss, red, parity, unsigned(dataThreads)); };
    failed |= !norm::normRow<T>(c, size_t(row), 0, rowPacks, unsigned(dataThreads), failed, invScale, sum, total);
  }
  return !failed;
}

}  // namespace fc::gemv
