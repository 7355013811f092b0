// The row steps of fcAllReduceResidualRMSNorm's kernels (allreduce_norm.cu: the
// one-shot and the local norm; allreduce_norm_twoshot.cu: the two-shot): a row's
// all-reduced packs plus the residual, stored as residualOut, the row's sum of squares
// over the CTA (or a thread block cluster), and the normed row stored as out (or fp8).
#pragma once

#include <cooperative_groups.h>
#include <cuda_fp8.h>

#include "collectives/chunks.cuh"
#include "collectives/collectives.h"
#include "device/norm_stages.h"
#include "device/pack.cuh"
#include "device/sync.cuh"

namespace fc::norm {

using dev::Pack;

// Row packs each data thread keeps between the reduction and the norm (indexed at run
// time, so in the thread's local memory, which measured faster than unrolled register
// variants: docs/perf-log.md); rows with more (hidden > kKeep * 8 * 512 in bf16)
// re-read their residualOut.
constexpr int kKeep = 4;

// Named barrier 1 among the first `threads` threads (the data threads; the call warp
// of a Lamport kernel never joins it). `threads` is a multiple of 32.
__device__ __forceinline__ void dataBarrier(unsigned threads) {
  asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
}

// The first n warps' partials part[0..n) summed in warp order, starting from 0 (the
// bits of a plain loop), read four at a time: 16-byte shared-memory loads, so that the
// 16 data warps of a 544-thread CTA cost every thread 4 loads instead of 16 on the row's
// critical path (each is a broadcast: all threads read the same words). part is 16-byte
// aligned (every red[] buffer below is declared __align__(16), rows of 32 floats).
__device__ __forceinline__ float sumPartials(const float* part, unsigned n) {
  float s = 0.f;
  unsigned w = 0;
  for (; w + 4 <= n; w += 4) {
    const float4 q = *reinterpret_cast<const float4*>(part + w);
    s += q.x;
    s += q.y;
    s += q.z;
    s += q.w;
  }
  for (; w < n; ++w) s += part[w];
  return s;
}

// Sum of `v` over the `threads` data threads, via red[2][32] (buffer `parity`; 16-byte
// aligned): every data thread gets it. One named barrier: a buffer is rewritten two rows
// later, after every thread has passed the next row's barrier, so after it has read this one.
__device__ __forceinline__ float rowSum(float v, float (*red)[32], int parity, unsigned threads) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31u) == 0) red[parity][threadIdx.x >> 5] = v;
  dataBarrier(threads);
  return sumPartials(red[parity], threads / 32);
}

// rowSum for R rows at once, for a CTA that holds several rows: every v[r] summed over
// the `threads` data threads through red[R][32] (16-byte aligned; in rowSum's order, so the same bits),
// one named barrier for all R. Called by every data thread; a caller that calls it again
// alternates two red buffers (as rowSum's parity: a buffer is rewritten only after every
// thread has passed the next call's barrier, so after it read this call's sums).
template <int R>
__device__ __forceinline__ void rowSums(float (&v)[R], float (*red)[32], unsigned threads) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v[r] += __shfl_xor_sync(0xffffffffu, v[r], o);
    if ((threadIdx.x & 31u) == 0) red[r][threadIdx.x >> 5] = v[r];
  }
  dataBarrier(threads);
#pragma unroll
  for (int r = 0; r < R; ++r) v[r] = sumPartials(red[r], threads / 32);
}

// Pack p of the normed row, x * rstd * weight: stored rounded once to T into out, or
// (outFp8) divided by the scale (multiplied by invScale) and rounded once to e4m3 with
// saturation to +-448, E bytes at element offset i.
template <typename T>
__device__ __forceinline__ void storeNormed(const NormCall& c, Pack* out, size_t p, size_t i, const Pack& x,
                                            const Pack& w, float rstd, float invScale) {
  constexpr int E = dev::PackTraits<T>::kElems;
  const T* xe = reinterpret_cast<const T*>(&x);
  const T* we = reinterpret_cast<const T*>(&w);
  float r[E];
#pragma unroll
  for (int e = 0; e < E; ++e) r[e] = dev::toFloat(xe[e]) * rstd * dev::toFloat(we[e]);
  if (c.outFp8 == nullptr) {
    out[p] = dev::toPack<T>(r);
    return;
  }
  uint16_t q[E / 2];
#pragma unroll
  for (int e = 0; e < E; e += 2)
    q[e / 2] = __nv_cvt_float2_to_fp8x2(make_float2(r[e] * invScale, r[e + 1] * invScale), __NV_SATFINITE, __NV_E4M3);
  uint8_t* dst = static_cast<uint8_t*>(c.outFp8) + i;
  if constexpr (E == 8) *reinterpret_cast<uint2*>(dst) = make_uint2(q[0] | uint32_t(q[1]) << 16, q[2] | uint32_t(q[3]) << 16);
  else *reinterpret_cast<uint32_t*>(dst) = q[0] | uint32_t(q[1]) << 16;
}

// residualOut's pack from the fp32 sum `acc` and the residual; adds its squares
// (of the rounded values) to ss.
template <typename T>
__device__ __forceinline__ Pack addResidual(float (&acc)[dev::PackTraits<T>::kElems], const Pack& res,
                                            float& ss) {
  dev::accumulate<T>(acc, res);
  const Pack x = dev::toPack<T>(acc);
  const T* xe = reinterpret_cast<const T*>(&x);
#pragma unroll
  for (int e = 0; e < dev::PackTraits<T>::kElems; ++e) {
    const float f = dev::toFloat(xe[e]);
    ss += f * f;
  }
  return x;
}

// normRow's packs [begin, end) of the row held in registers, kPacks a thread (end - begin
// <= kPacks x threads): thread t's packs are t, t + threads, ..., as normRow's loop walks
// them, with the same operations in the same order (the same bits), but each pack, its
// residual and its weight in registers of their own: every sum's loads are issued before
// the first is used, where the loop takes a pack's loads after the one before it is done.
template <typename T, int kPacks, typename Sum, typename Total>
__device__ __forceinline__ bool normRowInRegisters(const NormCall& c, size_t row, size_t begin, size_t end,
                                                   unsigned threads, bool failed, float invScale, Sum sum,
                                                   Total total, uint32_t stages) {
  constexpr int E = dev::PackTraits<T>::kElems;
  const size_t rowPacks = c.hidden / E, first = row * rowPacks;
  const Pack* residual = static_cast<const Pack*>(c.residual) + first;
  const Pack* weight = static_cast<const Pack*>(c.weight);
  Pack* residualOut = static_cast<Pack*>(c.residualOut) + first;
  Pack* out = c.out ? static_cast<Pack*>(c.out) + first : nullptr;  // NULL: the fp8 output instead
  const bool prefetch = stages & kNormPrefetch;
  const bool withResidual = stages & kNormResidual, withNorm = stages & kNormNorm;
  const Pack zero{0u, 0u, 0u, 0u};
  Pack r[kPacks], w[kPacks], x[kPacks];
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const size_t p = begin + threadIdx.x + size_t(j) * threads;
    r[j] = w[j] = x[j] = zero;
    if (p < end && prefetch) {
      if (withResidual) r[j] = residual[p];
      if (withNorm) w[j] = weight[p];
    }
  }
  float ss = 0.f;
  if (!failed) {
    // Every sum first, then the adds and stores: a store to residualOut may alias the
    // sums as far as the compiler knows, so a later pack's loads would not move above it.
    // As in the loop, no sum after one whose wait gave up (sum() returns false).
    float acc[kPacks][E];
    int got = 0;  // packs whose sums came, in order
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const size_t p = begin + threadIdx.x + size_t(j) * threads;
      if (got == j && p < end && sum(first + p, acc[j])) got = j + 1;
      else if (got == j && p < end) failed = true;
    }
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const size_t p = begin + threadIdx.x + size_t(j) * threads;
      if (j >= got) break;
      if (withResidual && !prefetch) r[j] = residual[p];
      x[j] = addResidual<T>(acc[j], r[j], ss);
      residualOut[p] = x[j];
    }
  }
  if (!withNorm) return !failed;  // uniform over the CTA: no barrier skipped by some
  const float rstd = rsqrtf(total(ss, failed) / float(c.hidden) + c.eps);
  if (failed) return false;
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const size_t p = begin + threadIdx.x + size_t(j) * threads;
    if (p < end) storeNormed<T>(c, out, p, (first + p) * E, x[j], prefetch ? w[j] : weight[p], rstd, invScale);
  }
  return true;
}

// Packs [begin, end) of one row (the CTA's share of it), by the `threads` data threads
// of the CTA: for each of this thread's packs p,
// sum(p, acc) sets acc to the all-reduced fp32 pack (false: the wait gave up); then the
// residual is added, residualOut stored, the row's sum of squares taken (total(ss,
// failed): over the whole row, from every CTA's share; it may set failed) and out
// written. Every data thread calls it for every row, also once `failed` is set (it then
// skips the sums and the stores but still passes the row's barrier, so that none is
// left waiting there). Returns whether this thread's sums all came.
//
// stages (device/norm_stages.h): kNormFull in real calls, a constant there, so that
// the tests below fold away. kNormPrefetch (part of kNormFull) loads this thread's
// residual and weight packs (its first kKeep of the row) before the first sum, whose
// polls wait for the peers, so that their latency hides under that wait instead of
// following it (measured: docs/perf-log.md).
//
// Where the CTA's share of the row is at most one pack a thread (rows of up to 512 packs
// in a CTA, hidden 4096 in bf16, or a cluster's share) the row takes a path of its own
// with that pack, its residual and its weight in registers: the loop's keep[] and
// prefetched arrays are indexed at run time, so they live in local memory (128 bytes of
// stack at 2 ranks), and every one of their loads and stores sat on the row's critical
// path after the data arrived. The same operations in the same order: the same bits.
// kNormLoopRow (measurement form) sends every row through the loop, as before.
// kOnePackOnly: the caller guarantees end - begin <= threads; the loop is not built
// (the kernel of two CTAs an SM: fewer registers, no spills).
template <typename T, bool kOnePackOnly = false, typename Sum, typename Total>
__device__ __forceinline__ bool normRow(const NormCall& c, size_t row, size_t begin, size_t end, unsigned threads,
                                        bool failed, float invScale, Sum sum, Total total,
                                        uint32_t stages = kNormFull) {
  constexpr int E = dev::PackTraits<T>::kElems;
  const size_t rowPacks = c.hidden / E, first = row * rowPacks;
  const Pack* residual = static_cast<const Pack*>(c.residual) + first;
  const Pack* weight = static_cast<const Pack*>(c.weight);
  Pack* residualOut = static_cast<Pack*>(c.residualOut) + first;
  Pack* out = c.out ? static_cast<Pack*>(c.out) + first : nullptr;  // NULL: the fp8 output instead
  const bool prefetch = stages & kNormPrefetch;
  const bool withResidual = stages & kNormResidual, withNorm = stages & kNormNorm;
  const Pack zero{0u, 0u, 0u, 0u};
  // (normRowInRegisters<T, 1> is the same path; kept here as written, since the Lamport
  // kernels built through it allocated their registers differently - the two-shot
  // kernel's spills moved by 16-48 bytes - on paths only two GPUs can time.)
  if (kOnePackOnly || (end - begin <= threads && !(stages & kNormLoopRow))) {  // uniform over the CTA
    const size_t p = begin + threadIdx.x;
    const bool mine = p < end;
    Pack r = zero, w = zero, x = zero;
    if (mine && prefetch) {
      if (withResidual) r = residual[p];
      if (withNorm) w = weight[p];
    }
    float ss = 0.f;
    if (mine && !failed) {
      float acc[E];
      if (!sum(first + p, acc)) {
        failed = true;
      } else {
        if (withResidual && !prefetch) r = residual[p];
        x = addResidual<T>(acc, r, ss);
        residualOut[p] = x;
      }
    }
    if (!withNorm) return !failed;  // uniform over the CTA: no barrier skipped by some
    const float rstd = rsqrtf(total(ss, failed) / float(c.hidden) + c.eps);
    if (failed) return false;
    if (mine) storeNormed<T>(c, out, p, (first + p) * E, x, prefetch ? w : weight[p], rstd, invScale);
    return true;
  }
  // Prefetched packs: the loads are unrolled, so all of them are in flight together
  // (read back at run-time indices below, from local memory like keep[]).
  Pack residualPre[kKeep], weightPre[kKeep];
  if (prefetch) {
#pragma unroll
    for (int j = 0; j < kKeep; ++j) {
      const size_t p = begin + threadIdx.x + size_t(j) * threads;
      if (p < end) {
        residualPre[j] = withResidual ? residual[p] : zero;
        weightPre[j] = withNorm ? weight[p] : zero;
      }
    }
  }
  Pack keep[kKeep];
  float ss = 0.f;
  int j = 0;
  for (size_t p = begin + threadIdx.x; p < end && !failed; p += threads, ++j) {
    float acc[E];
    if (!sum(first + p, acc)) {
      failed = true;
      break;
    }
    const Pack r = !withResidual ? zero : prefetch && j < kKeep ? residualPre[j] : residual[p];
    const Pack x = addResidual<T>(acc, r, ss);
    residualOut[p] = x;
    if (j < kKeep) keep[j] = x;
  }
  if (!withNorm) return !failed;  // uniform over the CTA: no barrier skipped by some
  const float rstd = rsqrtf(total(ss, failed) / float(c.hidden) + c.eps);
  if (failed) return false;
  j = 0;
  for (size_t p = begin + threadIdx.x; p < end; p += threads, ++j) {
    // Beyond the registers, re-read what this thread stored above (its own write).
    const Pack x = j < kKeep ? keep[j] : residualOut[p];
    storeNormed<T>(c, out, p, (first + p) * E, x, prefetch && j < kKeep ? weightPre[j] : weight[p], rstd, invScale);
  }
  return true;
}

// The row's sum of squares over a cluster of C CTAs that share the row: each CTA's
// total (rowSum) goes, tagged with the row's sequence number, into slot [parity][cta]
// of every CTA's clusterSums (distributed shared memory); every data thread waits for
// the C slots of its own copy and adds them in cluster-rank order (the same bits in
// every CTA, on every rank). A slot [parity] is written again two rows later, by a CTA
// that has then received this CTA's total of the row between, which this CTA sends
// after all its threads read this row's slots (the row's named barrier in rowSum). The
// wait has the library's deadline; a CTA whose sums failed still sends its total, so
// no partner waits for nothing; and the kernel ends with a cluster barrier, so that no
// CTA exits while a partner may still store into its slots.
struct ClusterRowSum {
  static constexpr unsigned kMaxCtas = 8;  // the portable cluster size
  const DeviceComm& dc;
  Op op;  // the error record's (the signature's: opOf)
  int channel;
  uint64_t (*sums)[kMaxCtas];  // clusterSums[2][kMaxCtas] of this CTA
  float (*red)[32];
  unsigned threads, ctas, rank;
  int parity;
  uint32_t seq;

  __device__ float operator()(float ss, bool& failed) const {
    const float mine = rowSum(ss, red, parity, threads);
    if (ctas == 1) return mine;
    namespace cg = cooperative_groups;
    if (threadIdx.x < ctas) {
      const uint64_t tagged = uint64_t(seq) << 32 | __float_as_uint(mine);
      uint64_t* slot = cg::this_cluster().map_shared_rank(&sums[parity][rank], threadIdx.x);
      *reinterpret_cast<volatile uint64_t*>(slot) = tagged;
    }
    float total = 0.f;
    dev::WaitExits exits;
    for (unsigned k = 0; k < ctas; ++k) {
      uint64_t v = *reinterpret_cast<volatile uint64_t*>(&sums[parity][k]);
      for (uint32_t spin = 1; uint32_t(v >> 32) != seq; ++spin) {
        if ((spin & 1023u) == 0u && exits.giveUp(dc, op, dc.rank, channel, seq, uint32_t(v >> 32),
                                                   WaitKind::LamportData)) {
          failed = true;
          return 0.f;
        }
        v = *reinterpret_cast<volatile uint64_t*>(&sums[parity][k]);
      }
      total += __uint_as_float(uint32_t(v));
    }
    return total;
  }
};

// Data threads for a row: one per pack, a whole number of warps, at most `most` (a
// multiple of 32).
inline unsigned rowThreads(size_t rowPacks, unsigned most = unsigned(dev::kThreads)) {
  const size_t t = (rowPacks + 31) / 32 * 32;
  return unsigned(t < size_t(most) ? t : size_t(most));
}

}  // namespace fc::norm
