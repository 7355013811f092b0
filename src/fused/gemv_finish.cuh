// The last phase of fcMatmulAllReduce's decode kernels (gemv_all_reduce.cu): a CTA's
// packs of the result, each summed over the ranks from the peers' Lamport pushes and
// its own partial, and stored as C - or, for the norm forms, with the residual added
// (residualOut, rounded once) and the row normalised (normOut, or fp8), all in the same
// kernel.
//
// A row's packs are spread over every CTA of the grid (a CTA owns columns, not rows),
// so the norm needs the row's sum of squares from all of them: each CTA writes its own
// per row (rowPartials, this rank's signal region), the CTAs meet at a grid barrier
// (all are resident: one per SM, at most maxCtas), and every CTA sums the row's
// partials in CTA order - the same fp32 operations in the same order on every rank,
// which hold the same residualOut bits, so normOut is the same bits everywhere too.
// This replaces a second kernel (the residual + RMSNorm on fp32 sums): its launch
// behind our grid and its re-reading of the sums.
#pragma once

#include "collectives/collectives.h"
#include "collectives/lamport.cuh"
#include "collectives/norm_rows.cuh"
#include "device/sync.cuh"

namespace fc::gemv {

using dev::Pack;

// Where the decode kernels store: C (plain form), or the norm's outputs.
struct Output {
  void* C;        // [M, N] in T: the plain form (withNorm false)
  NormCall norm;  // residual, weight, residualOut, out / outFp8 + scale, hidden = N, eps
  bool withNorm;
};

// The kernel's grid barrier on this GPU (one thread per CTA, after a CTA barrier; every
// CTA of the grid must arrive): sense reversal on {arrivals, generation} in this rank's
// signal region. The generation is read (acquire) before arriving - it moves on only
// once every CTA has arrived, so ours cannot be missed. The arrival is an acq_rel add:
// its release covers the stores the CTA barrier ordered before it (cumulativity), and
// the last arrival, which acquires every earlier one, resets the count and publishes
// the next generation with a release that passes them all on; the others acquire it,
// and a CTA barrier after this hands it to their threads. Bounded: WaitExits
// (deadline, abort, another CTA's or rank's error).
__device__ inline bool gridBarrier(const DeviceComm& dc, int channel, Op op) {
  uint32_t* words = reinterpret_cast<uint32_t*>(dc.base + size_t(dc.rank) * dc.stride + kGridBarrierOffset +
                                                size_t(channel) * 64);
  uint32_t* arrivals = words;
  uint32_t* generation = words + 1;
  uint32_t gen, before;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(gen) : "l"(generation) : "memory");
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(before) : "l"(arrivals) : "memory");
  if (before == gridDim.x - 1) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(arrivals) : "memory");  // before the release
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(generation), "r"(gen + 1u) : "memory");
    return true;
  }
  dev::WaitExits exits;
  for (uint32_t spin = 1;; ++spin) {
    uint32_t now;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(generation) : "memory");
    if (now != gen) return true;
    if ((spin & 1023u) == 0u &&
        exits.giveUp(dc, op, dc.rank, channel, gen + 1u, dev::loadVolatile(arrivals), WaitKind::Grid))
      return false;
  }
}

// The CTA's packs i in [0, count) (own[i]: this rank's partial of pack i; locate(i, m,
// part) gives its row and 8-column part, false where there is none), by the kData data
// threads. Every pack i of a thread has row i % MR = threadIdx.x % MR (kData is a
// multiple of MR), so a thread's squares are one row's. finalBarrier: a named barrier
// of the data threads. Returns false where a wait gave up (its error recorded).
template <typename T, int NR, int MR, int kData, typename Locate>
__device__ __forceinline__ bool finishPacks(const DeviceComm& dc, int channel,
                                            const dev::LamportRun<dev::LamportKind::Rows>& run, Pack* own, int count,
                                            int M, int N, const Output& o, int finalBarrier, Locate locate) {
  static_assert(kData % MR == 0 && 32 % MR == 0, "a thread's packs are one row's");
  constexpr int E = dev::PackTraits<T>::kElems;
  constexpr int kWarps = kData / 32;
  __shared__ float warpSums[kWarps][MR];
  __shared__ float rstd[MR];
  const int parts = N / E, tid = int(threadIdx.x);
  // A barrier of the data threads that also returns whether any of them passed true.
  const auto anyAtBarrier = [finalBarrier](bool v) {
    uint32_t any;
    asm volatile(
        "{ .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q; }"
        : "=r"(any)
        : "r"(uint32_t(v)), "r"(finalBarrier), "r"(kData)
        : "memory");
    return any != 0u;
  };
  const Pack* residual = static_cast<const Pack*>(o.norm.residual);
  const Pack* weight = static_cast<const Pack*>(o.norm.weight);
  Pack* residualOut = static_cast<Pack*>(o.norm.residualOut);
  // The norm's loads of this thread's first kPre packs (residual, weight) go out before
  // the polls, whose waits for the peers hide their latency (as normRow's prefetch).
  constexpr int kPre = 2;
  Pack residualPre[kPre], weightPre[kPre];
  float invScale = 1.f;
  if (o.withNorm) {
    if (o.norm.scale != nullptr) invScale = 1.f / *o.norm.scale;
#pragma unroll
    for (int k = 0; k < kPre; ++k) {
      int m, part;
      const int i = tid + k * kData;
      if (i < count && locate(i, m, part)) {
        residualPre[k] = residual[size_t(m) * size_t(parts) + size_t(part)];
        weightPre[k] = weight[part];
      }
    }
  }
  float ss = 0.f;
  bool failed = false;
  int k = 0;
  for (int i = tid; i < count && !failed; i += kData, ++k) {
    int m, part;
    if (!locate(i, m, part)) continue;
    const size_t pk = size_t(m) * size_t(parts) + size_t(part);
    float acc[E];
    if (!run.template sumInRankOrder<T, NR>(Op::MatmulAllReduce, channel, 0, pk, own[i], acc)) {
      failed = true;
      break;
    }
    run.clearRead(pk);
    if (!o.withNorm) {
      *reinterpret_cast<Pack*>(static_cast<T*>(o.C) + pk * E) = dev::toPack<T>(acc);
      continue;
    }
    const Pack x = norm::addResidual<T>(acc, k < kPre ? residualPre[k] : residual[pk], ss);  // rounded once
    residualOut[pk] = x;
    own[i] = x;  // for the norm below (own[i] is this thread's alone)
  }
  if (!o.withNorm) return !failed;
  // The row sums of squares over the CTA: the lanes of a row are MR apart.
#pragma unroll
  for (int off = MR; off < 32; off <<= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if (tid % 32 < MR) warpSums[tid / 32][tid % 32] = ss;
  if (anyAtBarrier(failed)) return false;  // (the other CTAs give up at the grid barrier: our error is recorded)
  float* partials = reinterpret_cast<float*>(dc.base + size_t(dc.rank) * dc.stride + kRowPartialsOffset) +
                    size_t(channel) * kRowPartialsRows * kMaxBlocks;
  if (tid < M) {
    float s = 0.f;
    for (int w = 0; w < kWarps; ++w) s += warpSums[w][tid];
    partials[size_t(tid) * kMaxBlocks + blockIdx.x] = s;
  }
  anyAtBarrier(false);  // our partials before thread 0's arrival (its release covers them)
  bool gaveUp = false;
  if (tid == 0) gaveUp = !gridBarrier(dc, channel, Op::MatmulAllReduce);
  if (anyAtBarrier(gaveUp)) return false;
  // Each row's total over the grid's CTAs, in CTA order then a fixed butterfly: warp w
  // takes rows w, w + kWarps, ...
  const int warp = tid / 32, lane = tid % 32;
  for (int m = warp; m < M; m += kWarps) {
    float s = 0.f;
    for (int b = lane; b < int(gridDim.x); b += 32) s += __ldcg(partials + size_t(m) * kMaxBlocks + b);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) rstd[m] = rsqrtf(s / float(N) + o.norm.eps);
  }
  anyAtBarrier(false);
  Pack* out = static_cast<Pack*>(o.norm.out);  // NULL: the fp8 output instead
  k = 0;
  for (int i = tid; i < count; i += kData, ++k) {
    int m, part;
    if (!locate(i, m, part)) continue;
    const size_t pk = size_t(m) * size_t(parts) + size_t(part);
    norm::storeNormed<T>(o.norm, out, pk, pk * E, own[i], k < kPre ? weightPre[k] : weight[part], rstd[m],
                         invScale);
  }
  return true;
}

}  // namespace fc::gemv
