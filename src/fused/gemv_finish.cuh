// The last phase of fcMatmulAllReduce's decode kernels (gemv_all_reduce.cu, both
// forms): a CTA's packs of the result, each summed over the ranks from the peers'
// Lamport pushes and its own partial, in rank order (the same bits on every rank), and
// stored rounded once - or, for the norm forms, unrounded in fp32 for the residual +
// RMSNorm kernel that follows (PDL), which adds the residual and rounds once
// (finishPacks); or the norm forms inside the kernel (finishNormed, FC_GEMV_NORM=inside).
//
// (The norm inside this kernel - the CTAs' row sums of squares meeting at a grid
// barrier - was built and measured, 23bbc21 / bad92d3, and lost to the kernel after
// it by 1.5-2.5 us: docs/perf-log.md, 2026-11-26, twentieth session. The barrier's chain
// was an arrival atomic, a poll of the generation word and the partials read back: three
// round trips to L2 in turn. finishNormed's row sums carry their own call tag instead,
// so a block's one store is its arrival and its partial at once, and the others' one
// poll reads both: one round trip. Measured at world size 1, it too lost to the kernel
// after it, by 0.2-1.5 us at 17 of 20 shapes (fifty-seventh session): forced only.)
#pragma once

#include "collectives/collectives.h"
#include "collectives/lamport.cuh"
#include "collectives/norm_rows.cuh"
#include "device/sync.cuh"

namespace fc::gemv {

using dev::Pack;

// Named barrier `id` among the first `threads` threads of the CTA (a multiple of 32).
__device__ __forceinline__ void namedBarrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

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

// ---- The norm inside the kernel (FC_GEMV_NORM=inside) --------------------------------------
// A row's RMS needs the sum of squares over all N columns, which the grid's blocks own in
// parts. Each block adds the residual to its packs (residualOut, rounded once, as the
// residual + RMSNorm kernel does), takes its sums of squares per row (of the rounded
// values), and stores each into the rank's rowSums[channel][row][block] as one 64-bit
// word {the call's epoch, the sum}; every block then polls all blocks' words of every
// row until each carries this call's epoch, sums them in block order (the same bits in
// every block and on every rank: every rank's blocks own the same columns and hold the
// same sums) and normalises its own packs. The grid is resident (one block per SM, at
// most kMaxBlocks), so every block it waits for runs; the wait is bounded anyway.
//
// Memory order: each word is written and read whole (64-bit, single-copy atomic), and
// nothing else is read on the strength of it, so relaxed gpu-scope accesses suffice (L2
// serves them: not L1, which does not see other SMs' stores). The epoch makes a word of an
// earlier call read as not yet written, so the words are never cleared.

// The Rows state's word holding the last call's epoch (CTA 0's words: words 1-3 are free).
constexpr int kRowSumsEpochWord = 1;

// This call's epoch: one more than the last call's, never 0 (the words' value before any
// call). Every block reads it after the PDL wait and before it arrives
// (LamportRun::arrive), so the store of the block that arrives last
// (publishRowSumsEpoch) follows every block's read, and the next call reads it.
__device__ __forceinline__ uint32_t rowSumsEpoch(const dev::LamportRun<dev::LamportKind::Rows>& run) {
  const uint32_t e = run.state[kRowSumsEpochWord] + 1u;
  return e != 0u ? e : 1u;
}
// before: what LamportRun::arrive returned to the block's arriving thread (its call warp's lane 0).
__device__ __forceinline__ void publishRowSumsEpoch(const dev::LamportRun<dev::LamportKind::Rows>& run,
                                                    uint32_t before, uint32_t epoch) {
  if (before == gridDim.x - 1) run.state[kRowSumsEpochWord] = epoch;
}

// rowSums[row][block] of this rank's channel.
__device__ __forceinline__ uint64_t* rowSumsOf(const DeviceComm& dc, int channel) {
  return reinterpret_cast<uint64_t*>(dc.base + size_t(dc.rank) * dc.stride + kRowSumsOffset) +
         size_t(channel) * kRowSumsRows * kMaxBlocks;
}

// The warp's sums of v[r] over its 32 lanes for every r < R (R a power of two <= 32) by a
// transposed butterfly: each of the first log2 R steps sends half of the values a lane still
// holds to its partner and adds the other half's, so the lane keeps half as many rows; the
// remaining 5 - log2 R steps sum the one row left over its lanes. R - 1 + 5 - log2 R
// shuffles in all, against 5 R in R chains of 5 dependent shuffles each (at 8 rows those
// chains took ~1450 cycles with their barrier, this ~450: docs/perf-log.md, sixtieth
// session). Returns the sum of row `row`, held by every lane of its group of 32 / R lanes
// (lanes 0 mod 32 / R among them); the order of the additions depends only on the lane,
// so every warp, block and rank sums a row the same way (the same bits). v is overwritten.
template <int R>
__device__ __forceinline__ float warpRowSums(float (&v)[R], int lane, int& row) {
  static_assert(R >= 1 && R <= 32 && (R & (R - 1)) == 0, "a power of two of rows");
  constexpr int kHalvings = R == 1 ? 0 : R == 2 ? 1 : R == 4 ? 2 : R == 8 ? 3 : R == 16 ? 4 : 5;
  row = 0;
#pragma unroll
  for (int st = 0; st < kHalvings; ++st) {
    const int o = 16 >> st, half = R >> (st + 1);
    const bool upper = (lane & o) != 0;  // keeps rows [half, 2 half) of those it holds
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const float send = upper ? v[i] : v[i + half];
      const float keep = upper ? v[i + half] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
    if (upper) row += half;
  }
  float s = v[0];
#pragma unroll
  for (int o = 16 >> kHalvings; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

// The norm forms' last phase inside the kernel: as finishPacks for the sums, then
// residualOut = round(sum + residual), out (or outFp8) = residualOut * rstd * weight with
// the row's rstd from every block's sums of squares. MR: the kernel's rows (M <= MR <=
// kRowSumsRows). Every data thread calls it (it holds named barrier `barrier` of
// dataThreads); a wait that gives up has recorded the error, and the thread then stores
// nothing more but still passes the barriers. scratch: MR x (dataThreads / 32 + 1) floats
// of shared memory no thread uses any more (the kernel's red[], after its last tile), so
// that the kernel's shared memory stays as it is without the norm (132 bytes of arrays of
// its own put the rings off their 128-byte alignment before the kernels declared it, and
// the one-row form took 1.4x its time: docs/perf-log.md, fifty-seventh session).
template <typename T, int NR, int MR, typename Locate>
__device__ __forceinline__ void finishNormed(int channel, const dev::LamportRun<dev::LamportKind::Rows>& run,
                                             const Pack* own, int count, int dataThreads, int barrier, int N, int M,
                                             const NormCall& c, uint32_t epoch, float* scratch, Locate locate) {
  constexpr int E = dev::PackTraits<T>::kElems;
  constexpr int kPolls = kMaxBlocks / 32;  // a lane's blocks of a row
  static_assert(MR <= kRowSumsRows && kMaxBlocks % 32 == 0, "rowSums' rows and blocks");
  const DeviceComm& dc = run.dc;
  const int parts = N / E, warps = dataThreads / 32, warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  float* part = scratch;                 // [MR][warps]: each warp's sum of squares of each row
  float* rstd = scratch + MR * warps;  // [MR]
  const int blocks = int(gridDim.x);
  const Pack* residual = static_cast<const Pack*>(c.residual);
  const Pack* weight = static_cast<const Pack*>(c.weight);
  Pack* residualOut = static_cast<Pack*>(c.residualOut);
  uint64_t* sums = rowSumsOf(dc, channel);
  const float invScale = c.scale ? 1.f / *c.scale : 1.f;
  bool failed = false;
  // 1. The sums, the residual added, residualOut stored; this thread's first pack (a
  // thread has one wherever the block's packs are at most its threads: every auto shape)
  // and its weight kept for step 4, the others read back there.
  float ss[MR];
#pragma unroll
  for (int r = 0; r < MR; ++r) ss[r] = 0.f;
  Pack kept{}, keptWeight{};
  for (int i = int(threadIdx.x); i < count && !failed; i += dataThreads) {
    int m, p;
    if (!locate(i, m, p)) continue;
    const size_t pk = size_t(m) * size_t(parts) + size_t(p);
    const Pack res = residual[pk];  // in flight during the polls below
    if (i == int(threadIdx.x)) keptWeight = weight[p];
    float acc[E];
    if (!run.template sumInRankOrder<T, NR>(Op::MatmulAllReduce, channel, 0, pk, own[i], acc)) {
      failed = true;
      break;
    }
    run.clearRead(pk);
    float s = 0.f;
    const Pack x = norm::addResidual<T>(acc, res, s);
    residualOut[pk] = x;
    if (i == int(threadIdx.x)) kept = x;
#pragma unroll
    for (int r = 0; r < MR; ++r)
      if (r == m) ss[r] += s;
  }
  // 2. The block's sum of squares of each row, over its warps in warp order, stored as
  // its word of this call.
  {
    int row;
    const float v = warpRowSums<MR>(ss, lane, row);
    if ((lane & (32 / MR - 1)) == 0 && row < M) part[row * warps + warp] = v;
  }
  namedBarrier(barrier, dataThreads);
  if (int(threadIdx.x) < M) {
    const int r = int(threadIdx.x);
    float v = 0.f;
    for (int w = 0; w < warps; ++w) v += part[r * warps + w];
    const uint64_t word = uint64_t(__float_as_uint(v)) << 32 | epoch;
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(sums + size_t(r) * kMaxBlocks + blockIdx.x), "l"(word)
                 : "memory");
  }
  // 3. Every block's words of each row (warp w: rows w, w + warps, ...; lane l: blocks l,
  // l + 32, ...), all of a lane's loads in flight together, then again for those not yet
  // of this call; summed in block order: the lane's blocks in turn, then the lanes by a
  // butterfly (a + b == b + a exactly, so every lane ends with the same bits).
  for (int r = warp; r < M; r += warps) {
    float v[kPolls];
    uint32_t missing = 0;
#pragma unroll
    for (int j = 0; j < kPolls; ++j) {
      v[j] = 0.f;
      if (lane + 32 * j < blocks) missing |= 1u << j;
    }
    dev::WaitExits exits;
    uint32_t seen = 0;
    for (uint32_t spin = 1; missing != 0u && !failed; ++spin) {
      uint64_t w[kPolls];
#pragma unroll
      for (int j = 0; j < kPolls; ++j)
        if (missing & (1u << j))
          asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];"
                       : "=l"(w[j])
                       : "l"(sums + size_t(r) * kMaxBlocks + size_t(lane + 32 * j))
                       : "memory");
#pragma unroll
      for (int j = 0; j < kPolls; ++j)
        if ((missing & (1u << j)) && uint32_t(w[j]) == epoch) {
          v[j] = __uint_as_float(uint32_t(w[j] >> 32));
          missing &= ~(1u << j);
        } else if (missing & (1u << j)) {
          seen = uint32_t(w[j]);
        }
      if (missing != 0u && (spin & 1023u) == 0u &&
          exits.giveUp(dc, Op::MatmulAllReduce, dc.rank, channel, epoch, seen, WaitKind::RowSums))
        failed = true;
    }
    float total = 0.f;
#pragma unroll
    for (int j = 0; j < kPolls; ++j) total += v[j];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
    if (lane == 0) rstd[r] = rsqrtf(total / float(N) + c.eps);
  }
  namedBarrier(barrier, dataThreads);
  if (failed) return;
  // 4. The block's packs normed.
  for (int i = int(threadIdx.x); i < count; i += dataThreads) {
    int m, p;
    if (!locate(i, m, p)) continue;
    const size_t pk = size_t(m) * size_t(parts) + size_t(p);
    const bool first = i == int(threadIdx.x);
    norm::storeNormed<T>(c, static_cast<Pack*>(c.out), pk, pk * E, first ? kept : residualOut[pk],
                         first ? keptWeight : weight[p], rstd[m], invScale);
  }
}

}  // namespace fc::gemv
