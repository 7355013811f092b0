// GEMV + all-reduce in one kernel: fcMatmulAllReduce's decode path (docs/design.md,
// "GEMM + all-reduce").
//
// A decode GEMM (a few rows of A against an nn.Linear weight B [N, K]) is bound by
// reading B. This kernel streams B once, whole 16-byte packs of 8 rows of B per lane
// with many loads in flight, and accumulates in fp32. Each tile of 8 columns (all M
// rows) is summed over its warps, rounded once to the input type - the rank's
// partial product, as a cuBLAS GEMM rounds it - and pushed at once into every peer's
// Lamport buffer (the Rows kind of lamport.cuh: the data is its own flag), while the
// other tiles are still being computed. At the end every CTA polls for its tiles'
// packs from every peer, sums them with its own in rank order in fp32 (the same bits
// on every rank) and stores the sum rounded once, or unrounded in fp32 for the norm
// forms, whose residual + RMSNorm kernel adds the residual and rounds once - or, with
// FC_GEMV_NORM=inside, adds the residual and normalises the rows itself, the blocks'
// sums of squares exchanged through the rank's memory (gemv_finish.cuh).
//
// Work: a CTA's warps form slots of S warps (S splits K); each slot takes tiles in
// turn at its own pace, so that the loads of B never wait for another slot. The grid
// is at most maxCtas (<= 128) CTAs of one per SM, all resident; a CTA polls only at
// the end, after pushing all its tiles, and only for the same tiles of its peers'
// CTAs, which are resident too.
// The Rows kind's bookkeeping is the rank's (any grid): every CTA reads the buffer
// index, the last to arrive moves it on, and readers clear the packs they read.
//
// Two forms of the product (GemvForm): CUDA-core FMAs on tiles of 8 columns (up to 4
// rows: each row costs its FMAs, so from 2 rows they fall behind cuBLAS's tensor
// cores), and tensor-core MMAs (mma.sync m16n8k16, fp32 accumulation) on tiles of 32
// columns for 2-16 rows, where the rows ride in an MMA's M for free and the kernel stays
// bound by reading B. Both push, poll and sum the same 8-column packs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "collectives/dispatch.cuh"
#include "collectives/lamport.cuh"
#include "collectives/launch.h"
#include "core/preload.h"
#include "fused/fused.h"
#include "fused/gemv_finish.cuh"
#include "tuning/tuning.h"

namespace fc {
namespace {

using dev::Pack;
using gemv::namedBarrier;
constexpr int E = 8;  // elements of a 16-bit type in a pack: a tile's columns

constexpr int kWarps = 8;  // a CTA's data warps (one CTA per SM)
constexpr int kData = kWarps * 32;
constexpr int kFinalBarrier = 15;  // named barrier of all data threads (1..8: the tile slots')
// red[] (at least kWarps x MR x 8 floats) holds finishNormed's MR x (kWarps + 1).
static_assert(kWarps * E >= kWarps + 1, "finishNormed's scratch in red[]");

__device__ __forceinline__ Pack loadPack(const Pack* p) {
  const int4 v = __ldg(reinterpret_cast<const int4*>(p));
  return Pack{uint32_t(v.x), uint32_t(v.y), uint32_t(v.z), uint32_t(v.w)};
}

// ---- The lanes' rings of loads (both forms) ------------------------------------------------
// A decode GEMM is bound by reading B, and reading at the HBM's rate takes ~30-40 KiB in
// flight per SM (H200: ~4 TB/s over 132 SMs at ~1 us of latency under load). Loads into
// registers hold one batch ahead (10 packs a lane: ~40 KiB a CTA, and the registers of
// 9 warps capped at 168). A ring keeps D batches in flight in shared memory instead: each
// lane copies its own packs (cp.async, 16 bytes, through L2 only) into [stage][pack][lane]
// of its warp's ring and reads back only what it copied itself, so that no barrier orders
// the copies and the reads: the lane's own cp.async.wait_group does (PTX: the writes of
// the copies it waited for are visible to the executing thread). A stage is rewritten
// only after the MMAs or FMAs that consumed it were issued: they depend on the registers
// its reads filled, so those reads have completed.
__device__ __forceinline__ unsigned smemAddress(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void copyPack(Pack* dst, const Pack* src, bool valid) {
  const unsigned d = smemAddress(dst);
  // src-size 0 copies nothing and zero-fills the pack (past K, N or M).
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void commitCopies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Wait until at most `pending` (0-7) of this thread's groups of copies are in flight.
__device__ __forceinline__ void waitCopies(int pending) {
  switch (pending) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 7;" ::: "memory"); break;
  }
}

static_assert(tuning::kGemvMaxRingStages <= 8, "waitCopies: at most 7 groups pending");
struct LaneRing {
  Pack* mine;  // this lane's pack 0 of stage 0 (ring + warp * stages * packs * 32 + lane)
  int packs, stages;
  __device__ __forceinline__ Pack* stage(int st) const { return mine + st * packs * 32; }
};

// The warp's batches 0..count-1, from batch `first` on (wrapping): issue(b, stage)
// copies batch b's packs into a stage, stages - 1 batches ahead; consume(stage) reads
// them back, in the same order. Every batch is one commit group (an empty one past the
// end), so that wait_group(stages - 1) finds the oldest complete.
// shared: the lanes read each other's copies (the warp's own stage), so a warp barrier
// orders every lane's copies before the reads (after its wait) and every lane's reads of
// a stage before the copies that rewrite it.
template <typename Issue, typename Consume>
__device__ __forceinline__ void runRing(const LaneRing& r, int count, int first, bool shared, Issue&& issue,
                                        Consume&& consume) {
  const auto batch = [&](int i) { return i + first < count ? i + first : i + first - count; };
  for (int s = 0; s < r.stages - 1; ++s) {
    if (s < count) issue(batch(s), r.stage(s));
    commitCopies();
  }
  int st = 0;
  for (int i = 0; i < count; ++i) {
    const int ahead = i + r.stages - 1, aheadStage = st == 0 ? r.stages - 1 : st - 1;
    if (shared) __syncwarp();
    if (ahead < count) issue(batch(ahead), r.stage(aheadStage));
    commitCopies();
    waitCopies(r.stages - 1);
    if (shared) __syncwarp();
    consume(r.stage(st));
    st = st + 1 == r.stages ? 0 : st + 1;
  }
}

// The batch a warp starts its tile's `count` batches at (runRing's `first`): with rotate
// (the kernels say why), tile / tiles of the way along; else 0.
__device__ __forceinline__ int firstBatch(bool rotate, int tile, int tiles, int count) {
  return rotate && count > 0 ? int(int64_t(tile) * count / tiles) : 0;
}

// Bring the `bytes` at p into L2 ahead of their loads: prefetch.global.L2 of each 128-byte
// line they touch (from p itself, then each line boundary inside: no address outside
// them). A hint that computes nothing, holds no register and waits for nothing, so it is
// allowed before dev::waitForPreviousGrid, even for memory the previous grid may still
// write: L2 is the GPU's point of coherence for global memory (one copy of a line, which
// the previous grid's stores update), so a load after the wait still sees those stores.
// (Not into L1, which is not coherent with other SMs' stores.) Lines, not the bulk-copy
// unit's cp.async.bulk.prefetch.L2 of each lane's segment: with the lanes' 128-byte
// segments of the MMA form the bulk prefetches cost 0.3-0.8 us a call more than they hid,
// the lines took 0-0.7 off (one H200, the weight cold; perf-log, sixty-second session).
__device__ __forceinline__ void prefetchL2(const void* p, unsigned bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), end = a + bytes;
  asm volatile("prefetch.global.L2 [%0];" ::"l"(a) : "memory");
  for (uintptr_t line = (a | 127) + 1; line < end; line += 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(line) : "memory");
}

// Into L2 before the kernel's griddepcontrol.wait: batches first, first + 1, ... (wrapping
// at count, as runRing takes them) of the warp's first tile, `prefetch` of them, in one
// row of B from `row`: batch b's `packs` packs from pack packOf(b) (fewer at the end of K).
// What a call's first loads would otherwise wait for after the wait, fetched while the
// previous grid finishes (its last CTAs, its memory flush).
template <typename T, typename PackOf>
__device__ __forceinline__ void prefetchBatches(const T* row, int count, int first, int prefetch, int kPacks,
                                                PackOf&& packOf, int packs) {
  for (int i = 0; i < prefetch && i < count; ++i) {
    const int kp = packOf(first + i < count ? first + i : first + i - count);
    prefetchL2(row + size_t(kp) * E, unsigned(min(packs, kPacks - kp)) * unsigned(sizeof(Pack)));
  }
}

// ---- The call's buffer index, from the call warp to the data warps -----------------------
// Every CTA reads the Rows kind's buffer index (and, for the norm inside, the call's epoch)
// before it arrives, and the CTA that arrives last moves them on (LamportRun::arrive). The
// data warps need the index only at their first push, a tile's loads later, but when every
// thread read it at the start each data warp waited for that read's round trip to L2 before
// its first loads of B: ptxas put the index into a uniform register, a loop invariant of
// the pushes, in front of the loops (an R2UR waiting on the LDG before the first LDGSTS),
// and warp 0 waited for thread 0's arrival, whose acq_rel atomic is a fence (MEMBAR.GPU).
// So the call warp's lane 0 reads them, hands them over in shared memory behind an
// mbarrier of one arrival (release / acquire at CTA scope), and arrives for the CTA after
// its own reads; a data warp waits on the mbarrier where it first needs the index.
struct RunIndex {
  uint64_t ready;  // the mbarrier: one arrival, the call warp's
  uint32_t buf, epoch;
};
__device__ __forceinline__ void initRunIndex(RunIndex& r) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smemAddress(&r.ready)) : "memory");
}
__device__ __forceinline__ void publishRunIndex(RunIndex& r, uint32_t buf, uint32_t epoch) {
  r.buf = buf;
  r.epoch = epoch;
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(smemAddress(&r.ready)) : "memory");
}
// The index (and the epoch into `epoch`). Not bounded, and need not be: the call warp of
// the same CTA arrives unconditionally right after two loads of this rank's memory, long
// before a data warp's first push.
__device__ __forceinline__ uint32_t awaitRunIndex(const RunIndex& r, uint32_t& epoch) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smemAddress(&r.ready))
        : "memory");
  epoch = r.epoch;
  return r.buf;
}

// The call warp's part (threads kData and up): it reads the index (and the epoch), and its
// lane 0 hands them to the data warps; CTA 0's call warp then checks the call against the
// peers' (shape signature), which the data threads never wait for (a mismatch ends their
// waits through the error guard); last, lane 0 arrives for the CTA and, where it arrives
// last, moves the index (and the epoch) on - every CTA has then read them, and the next
// call reads them only after this grid has completed (griddepcontrol.wait, or stream
// order). The check before the arrival: the arrival waits for its atomic's round trip,
// which nothing in this call needs.
__device__ __forceinline__ void callWarp(const DeviceComm& dc, int channel, RunIndex& index, bool normInside,
                                         uint32_t sig, int M, int N) {
  const dev::LamportRun<dev::LamportKind::Rows> run(dc, channel);
  const uint32_t epoch = normInside ? gemv::rowSumsEpoch(run) : 0u;
  const bool lane0 = threadIdx.x == unsigned(kData);
  if (lane0) publishRunIndex(index, run.buf, epoch);
  if (blockIdx.x == 0) {
    dev::LamportCall call(dc, channel, sig, uint64_t(M) * uint64_t(N));
    call.run(Op::MatmulAllReduce, channel);
  }
  if (lane0) {
    const uint32_t before = run.arrive();  // acq_rel: after this thread's reads above
    run.advanceIfLast(before);
    if (normInside) gemv::publishRowSumsEpoch(run, before, epoch);
  }
}

// acc[m][c] += row m of A's pack . column c's pack of B (8 elements each), fp32.
template <typename T, int MR>
__device__ __forceinline__ void fmaPacks(float (&acc)[MR][E], const Pack (&a)[MR], const Pack (&b)[E], int M) {
  float af[MR][E];
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    const T* ae = reinterpret_cast<const T*>(&a[m]);
#pragma unroll
    for (int e = 0; e < E; ++e) af[m][e] = m < M ? dev::toFloat(ae[e]) : 0.f;
  }
#pragma unroll
  for (int c = 0; c < E; ++c) {
    const T* be = reinterpret_cast<const T*>(&b[c]);
    float bf[E];
#pragma unroll
    for (int e = 0; e < E; ++e) bf[e] = dev::toFloat(be[e]);
#pragma unroll
    for (int m = 0; m < MR; ++m)
#pragma unroll
      for (int e = 0; e < E; ++e) acc[m][c] = fmaf(af[m][e], bf[e], acc[m][c]);
  }
}

// out: C [M, N] in T, or (fp32Out) the fp32 sums [M, N]. S: warps per tile (a power of
// two dividing kWarps); perSlot: the most tiles one slot of S warps takes; stages: the
// lanes' rings' depth (0: loads into registers), the rings at ringAt packs into the
// dynamic shared memory; rotate: each tile's warps start their batches of K at
// tile / tiles of the way along (the rings only), so that the CTAs do not all read the
// same columns of B's rows at once (ncu, 2 x 4096 x 7168: DRAM 59.7 -> 61.2 % of peak).
template <typename T, int NR, int MR>
__global__ void __launch_bounds__(kData + dev::kCallWarpThreads, 1)
    gemvAllReduceKernel(DeviceComm dc, int channel, const T* A, const T* B, void* out, bool fp32Out, int M, int N,
                        int K, int S, int perSlot, int stages, int ringAt, bool rotate, int prefetch,
                        NormCall norm, bool normInside, uint32_t sig) {
  __shared__ float red[kWarps][MR * E];
  __shared__ RunIndex index;
  if (threadIdx.x == unsigned(kData)) initRunIndex(index);
  // This CTA's rounded partials, [slot][its n-th tile][row], then the rings (ringAt: 128-byte
  // aligned in it). 128-byte aligned whatever the static red[] takes: with the rings 16
  // bytes off (132 bytes more of static arrays) the one-row form with rings took 1.4x its
  // time and the MMA form's up to 1.05x (perf-log, fifty-seventh session).
  extern __shared__ __align__(128) Pack own[];
  const int W = NR > 0 ? NR : dc.nranks;
  const int rank = dc.rank, warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  const int slots = kWarps / S, tiles = N / E, kPacks = K / E, stride = int(gridDim.x) * slots;
  // Slot `slot` (S warps) takes tiles slot * grid + blockIdx.x + n * stride, each warp of
  // it every S-th pack of K: `count` batches of 32 packs a tile (the rings). Computed before
  // the PDL wait, as is the first tile's first batch: they depend on the arguments alone,
  // and their three integer divisions (chains of dependent MUFU.RCP / IMAD.HI, ~65 SASS
  // instructions) stood between the wait and the first loads of B (perf-log, 2026-12-04).
  const int slot = warp / S, kSplit = warp % S, firstTile = slot * int(gridDim.x) + int(blockIdx.x);
  const int groups = (kPacks + 31) / 32, count = groups > kSplit ? (groups - kSplit + S - 1) / S : 0;
  const int firstAt = firstBatch(stages > 0 && rotate, firstTile, tiles, count);
  // The first `prefetch` batches of the warp's first tile, into L2 while the previous
  // grid finishes (B only: the weight; safe before the wait: prefetchL2). Lanes 0-7
  // take the tile's 8 rows of B, a batch 32 packs of each.
  if (prefetch > 0 && threadIdx.x < unsigned(kData) && lane < E && firstTile < tiles)
    prefetchBatches(B + (size_t(firstTile) * E + size_t(lane)) * size_t(K), count, firstAt, prefetch, kPacks,
                    [&](int b) { return (kSplit + b * S) * 32; }, 32);
  __syncthreads();  // the mbarrier initialised
  // Programmatic dependent launch: A (the previous kernel's output, typically) and the
  // Lamport state are read only after the previous grid has completed.
  dev::waitForPreviousGrid();
  if (threadIdx.x >= unsigned(kData)) {
    callWarp(dc, channel, index, normInside, sig, M, N);
    return;
  }
  dev::LamportRun<dev::LamportKind::Rows> run(dc, channel, dev::LamportRun<dev::LamportKind::Rows>::Unread{});
  uint32_t epoch = 0;  // with run.buf, from the call warp (awaitRunIndex)
  // Slots go at their own pace (no barrier but the slot's). Tiles go to the CTAs first,
  // then to their slots, so that every SM reads its share of B (N = 5120: 640 tiles, 5 a
  // CTA; CTA-first gave 80 CTAs 8 tiles and 48 none).
  const Pack* a = reinterpret_cast<const Pack*>(A);
  int n = 0;
  for (int tile = firstTile; tile < tiles; tile += stride, ++n) {
    float acc[MR][E];
#pragma unroll
    for (int m = 0; m < MR; ++m)
#pragma unroll
      for (int c = 0; c < E; ++c) acc[m][c] = 0.f;
    // B is read once, one iteration's packs loaded ahead (with the default cache policy,
    // as cuBLAS reads it: a weight that fits L2 stays there across calls); A's rows are
    // shared by every tile and stay cached.
    const Pack* b = reinterpret_cast<const Pack*>(B + size_t(tile) * E * size_t(K));
    if (stages > 0) {
      // Iteration i: pack kp = (kSplit + i S) 32 + lane of B's 8 rows and A's rows.
      const LaneRing ring{own + ringAt + size_t(warp) * size_t(stages) * (E + MR) * 32 + lane, E + MR, stages};
      runRing(
          ring, count, n == 0 ? firstAt : firstBatch(rotate, tile, tiles, count), false,
          [&](int i, Pack* st) {
            const int kp = (kSplit + i * S) * 32 + lane;
            const bool inK = kp < kPacks;
#pragma unroll
            for (int c = 0; c < E; ++c) copyPack(st + c * 32, inK ? b + size_t(c) * kPacks + kp : b, inK);
#pragma unroll
            for (int m = 0; m < MR; ++m)
              copyPack(st + (E + m) * 32, inK && m < M ? a + size_t(m) * kPacks + kp : a, inK && m < M);
          },
          [&](const Pack* st) {
            Pack bp[E], ap[MR];
#pragma unroll
            for (int c = 0; c < E; ++c) bp[c] = st[c * 32];
#pragma unroll
            for (int m = 0; m < MR; ++m) ap[m] = st[(E + m) * 32];
            fmaPacks<T, MR>(acc, ap, bp, M);
          });
    }
    // Without a ring: iteration i's packs in registers, the next iteration's loaded ahead.
    // With one, the ring above has taken every pack, so the loop starts past the end and
    // runs no iteration (one code path for both: no second copy of the loop to keep).
    int kp = stages > 0 ? kPacks : kSplit * 32 + lane;
    Pack cur[E];
    if (kp < kPacks) {
#pragma unroll
      for (int c = 0; c < E; ++c) cur[c] = loadPack(b + size_t(c) * kPacks + kp);
    }
    while (kp < kPacks) {
      const int next = kp + S * 32;
      Pack ahead[E], ap[MR];
      if (next < kPacks) {
#pragma unroll
        for (int c = 0; c < E; ++c) ahead[c] = loadPack(b + size_t(c) * kPacks + next);
      }
#pragma unroll
      for (int m = 0; m < MR; ++m)
        if (m < M) ap[m] = loadPack(a + size_t(m) * kPacks + kp);
      fmaPacks<T, MR>(acc, ap, cur, M);
      if (next < kPacks) {
#pragma unroll
        for (int c = 0; c < E; ++c) cur[c] = ahead[c];
      }
      kp = next;
    }
    // The tile's sums: over the lanes of each warp (every lane gets them), then over the
    // slot's S warps in order.
#pragma unroll
    for (int m = 0; m < MR; ++m)
#pragma unroll
      for (int c = 0; c < E; ++c)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc[m][c] += __shfl_xor_sync(0xffffffffu, acc[m][c], o);
    if (S > 1) {
      if (lane == 0)
#pragma unroll
        for (int m = 0; m < MR; ++m)
#pragma unroll
          for (int c = 0; c < E; ++c) red[warp][m * E + c] = acc[m][c];
      namedBarrier(1 + slot, S * 32);
    }
    if (kSplit == 0 && lane < M) {
      float s[E] = {};
#pragma unroll
      for (int m = 0; m < MR; ++m)
        if (m == lane)
#pragma unroll
          for (int c = 0; c < E; ++c) {
            s[c] = acc[m][c];
            for (int w = 1; w < S; ++w) s[c] += red[warp + w][m * E + c];
          }
      const Pack p = dev::toPack<T>(s);  // the rank's partial, rounded once
      own[(slot * perSlot + n) * MR + lane] = p;
      // Into our slot of every peer's current buffer, now: the peers poll for it.
      const Pack pushed = dev::notEmpty(p);
      const size_t pk = size_t(lane) * size_t(tiles) + size_t(tile);
      run.buf = awaitRunIndex(index, epoch);
#pragma unroll 8
      for (int j = 1; j < W; ++j) run.slot((rank + j) % W, run.buf, 0, rank)[pk] = pushed;
    }
    if (S > 1) namedBarrier(1 + slot, S * 32);  // red[] is rewritten by the slot's next tile
  }
  // The next kernel may launch; it waits for this grid (griddepcontrol.wait).
  dev::allowDependentLaunch();
  namedBarrier(kFinalBarrier, kData);  // own[] complete
  run.buf = awaitRunIndex(index, epoch);
  // Every pack of this CTA's tiles: the peers' partials (polled), ours, summed in rank
  // order, stored (gemv_finish.cuh). A wait that gives up has recorded the error.
  const auto locate = [&](int i, int& m, int& part) {  // own[]: [slot][n-th tile][row]
    m = i % MR;
    const int sn = i / MR, sl = sn / perSlot;
    part = sl * int(gridDim.x) + int(blockIdx.x) + (sn % perSlot) * stride;
    return part < tiles && m < M;
  };
  if (normInside)
    gemv::finishNormed<T, NR, MR>(channel, run, own, slots * perSlot * MR, kData, kFinalBarrier, N, M, norm, epoch,
                                  &red[0][0], locate);
  else
    gemv::finishPacks<T, NR>(channel, run, own, slots * perSlot * MR, kData, N, out, fp32Out, locate);
}

// ---- The tensor-core form -----------------------------------------------------------------
// A tile is kSub x 8 = 32 columns. A warp's lane l holds column (l / 4) of each 8-column
// part and packs of 8 k-elements at k = 32g + 8(l % 4) of a group g of 32 (B [N, K] is
// row-major in k, so each lane loads whole 16-byte packs), and the same packs of A's
// rows l / 4 and l / 4 + 8. The MMA's fragments want k pairs {2q, 2q+1} and {2q+8,
// 2q+9} of each 16 (q = l % 4): a lane's pack holds k 8q..8q+7, which two MMAs take as
// (8q+{0,1}, 8q+{2,3}) and (8q+{4,5}, 8q+{6,7}). That permutes k within the group the
// same way for A and B, so every product A[m][k] B[k][n] is still summed once.
constexpr int kSub = 4;                  // 8-column parts of a tile
constexpr int kTileCols = kSub * E;      // a tile's columns
constexpr int kGroupsAhead = 2;          // groups of 32 k per load batch (8 B packs per lane)
constexpr int kRedStride = kTileCols + 8;  // red[] row stride: fewer bank conflicts
static_assert(size_t(kTileCols) == tuning::kGemvMmaTileCols, "the tuning rule's tile width");

template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

// One batch of a lane's packs: kGroupsAhead groups of 32 k, each B's pack of the lane's
// column in every part (p[u][j], j < kSub), then A's packs of rows g (and g + 8 where MR
// = 16: p[u][kSub + h]); zero past K, N or M.
template <int MR>
struct MmaLoads {
  static constexpr int kPer = kSub + MR / 8;  // packs of a group
  Pack p[kGroupsAhead][kPer];
};

// visit(u, i, src, valid) for each pack i of group u of the lane's batch from group
// firstGroup: where it is read from, and whether it exists (else it is zero). The loads
// into registers and the lanes' own copies into their rings take the same packs.
template <int MR, typename Visit>
__device__ __forceinline__ void forEachPack(const Pack* a, const Pack* const (&b)[kSub], int firstGroup, int kPacks,
                                            int M, int g, int q, Visit&& visit) {
#pragma unroll
  for (int u = 0; u < kGroupsAhead; ++u) {
    const int kp = (firstGroup + u) * 4 + q;
    const bool inK = kp < kPacks;
#pragma unroll
    for (int j = 0; j < kSub; ++j) {
      const bool valid = inK && b[j] != nullptr;
      visit(u, j, valid ? b[j] + kp : a, valid);
    }
#pragma unroll
    for (int h = 0; h < MR / 8; ++h) {
      const int m = g + 8 * h;
      const bool valid = inK && m < M;
      visit(u, kSub + h, valid ? a + size_t(m) * kPacks + kp : a, valid);
    }
  }
}

template <int MR>
__device__ __forceinline__ void loadBatch(MmaLoads<MR>& L, const Pack* a, const Pack* const (&b)[kSub],
                                          int firstGroup, int kPacks, int M, int g, int q) {
  forEachPack<MR>(a, b, firstGroup, kPacks, M, g, q, [&](int u, int i, const Pack* src, bool valid) {
    L.p[u][i] = valid ? loadPack(src) : Pack{0u, 0u, 0u, 0u};
  });
}

template <typename T, int MR>
__device__ __forceinline__ void mmaBatch(float (&d)[kSub][4], const MmaLoads<MR>& L) {
#pragma unroll
  for (int u = 0; u < kGroupsAhead; ++u) {
    const Pack r0 = L.p[u][kSub];
    const Pack r1 = MR == 16 ? L.p[u][kSub + 1] : Pack{0u, 0u, 0u, 0u};
#pragma unroll
    for (int j = 0; j < kSub; ++j) {
      const Pack& bp = L.p[u][j];
      mma16816<T>(d[j], r0.x, r1.x, r0.y, r1.y, bp.x, bp.y);
      mma16816<T>(d[j], r0.z, r1.z, r0.w, r1.w, bp.z, bp.w);
    }
  }
}

// The tensor-core form of gemvAllReduceKernel (same arguments and rowCopies; MR: 8 or 16
// rows; the tiles are 32 columns, own[] holds [slot][n-th tile][part][row]). rowCopies
// (with rings): a warp copies B's rows whole, 128 bytes of each of 4 rows an instruction,
// and its lanes read each other's copies (ncu, 2 x 4096 x 7168: DRAM 59.3 -> 62.0 % of
// peak).
template <typename T, int NR, int MR>
__global__ void __launch_bounds__(kData + dev::kCallWarpThreads, 1)
    gemvMmaAllReduceKernel(DeviceComm dc, int channel, const T* A, const T* B, void* out, bool fp32Out, int M,
                           int N, int K, int S, int perSlot, int stages, int ringAt, bool rotate, bool rowCopies,
                           int prefetch, NormCall norm, bool normInside, uint32_t sig) {
  static_assert(MR == 8 || MR == 16, "an MMA's 16 rows: the first 8 or all");
  __shared__ __align__(16) float red[kWarps][MR * kRedStride];
  __shared__ RunIndex index;
  if (threadIdx.x == unsigned(kData)) initRunIndex(index);
  extern __shared__ __align__(128) Pack own[];  // as gemvAllReduceKernel's
  const int W = NR > 0 ? NR : dc.nranks;
  const int rank = dc.rank, warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  const int parts = N / E, tiles = (parts + kSub - 1) / kSub, kPacks = K / E;
  const int kBatches = (kPacks + 4 * kGroupsAhead - 1) / (4 * kGroupsAhead);
  const int slots = kWarps / S, stride = int(gridDim.x) * slots;
  // The warp's place, its batches a tile and its first tile's first batch before the PDL
  // wait, as gemvAllReduceKernel's.
  const int slot = warp / S, kSplit = warp % S, firstTile = slot * int(gridDim.x) + int(blockIdx.x);
  const int count = kBatches > kSplit ? (kBatches - kSplit + S - 1) / S : 0;
  const int firstAt = firstBatch(stages > 0 && rotate, firstTile, tiles, count);
  // As gemvAllReduceKernel: lane l takes row l of the tile's 32 rows of B, a batch 8
  // packs of it (kGroupsAhead groups of 32 k).
  if (prefetch > 0 && threadIdx.x < unsigned(kData) && firstTile < tiles && firstTile * kSub + lane / E < parts)
    prefetchBatches(B + (size_t(firstTile) * kTileCols + size_t(lane)) * size_t(K), count, firstAt, prefetch, kPacks,
                    [&](int b) { return (kSplit + b * S) * kGroupsAhead * 4; }, kGroupsAhead * 4);
  __syncthreads();  // as gemvAllReduceKernel
  dev::waitForPreviousGrid();
  if (threadIdx.x >= unsigned(kData)) {
    callWarp(dc, channel, index, normInside, sig, M, N);
    return;
  }
  dev::LamportRun<dev::LamportKind::Rows> run(dc, channel, dev::LamportRun<dev::LamportKind::Rows>::Unread{});
  uint32_t epoch = 0;
  const int g = lane / 4, q = lane % 4;
  const int slotThread = kSplit * 32 + lane;
  const Pack* a = reinterpret_cast<const Pack*>(A);
  int n = 0;
  // Tiles go to the CTAs first, then to their slots (tile = slot * grid + CTA + n *
  // stride): where there are fewer tiles than slots, every SM still gets some, so that
  // the loads of B spread over all of them (N = 5120: 160 tiles on 128 CTAs).
  for (int tile = firstTile; tile < tiles; tile += stride, ++n) {
    const Pack* b[kSub];
#pragma unroll
    for (int j = 0; j < kSub; ++j) {
      const int part = tile * kSub + j;
      b[j] = part < parts ? reinterpret_cast<const Pack*>(B + (size_t(part) * E + size_t(g)) * size_t(K)) : nullptr;
    }
    float d[kSub][4];
#pragma unroll
    for (int j = 0; j < kSub; ++j) d[j][0] = d[j][1] = d[j][2] = d[j][3] = 0.f;
    if (stages > 0) {
      // Batch i of the warp: kSplit + i S, its packs [group][B's parts, A's rows].
      constexpr int kPer = MmaLoads<MR>::kPer;
      const LaneRing ring{own + ringAt + size_t(warp) * size_t(stages) * kGroupsAhead * kPer * 32 + lane,
                          kGroupsAhead * kPer, stages};
      const Pack* rows = reinterpret_cast<const Pack*>(B + size_t(tile) * kTileCols * size_t(K));
      runRing(
          ring, count, n == 0 ? firstAt : firstBatch(rotate, tile, tiles, count), rowCopies,
          [&](int i, Pack* st) {
            if (rowCopies) {
              // B's 32 rows x 8 packs of the batch, 4 rows an instruction (8 lanes a row, its
              // 128 bytes), pack p of row r at r * 8 + (p ^ r % 8): the reads below then hit 8
              // distinct 16-byte bank groups in each quarter-warp. A's packs each lane its own.
              Pack* w = st - lane;
              const int kp0 = (kSplit + i * S) * kGroupsAhead * 4, p = lane % 8;
#pragma unroll
              for (int c = 0; c < kTileCols / 4; ++c) {
                const int r = c * 4 + lane / 8, kp = kp0 + p;
                const bool valid = kp < kPacks && tile * kSub + r / E < parts;
                copyPack(w + r * 8 + (p ^ (r % 8)), valid ? rows + size_t(r) * kPacks + kp : a, valid);
              }
              forEachPack<MR>(a, b, (kSplit + i * S) * kGroupsAhead, kPacks, M, g, q,
                              [&](int u, int j, const Pack* src, bool valid) {
                                if (j >= kSub)  // A's packs
                                  copyPack(w + kTileCols * 8 + (u * (MR / 8) + j - kSub) * 32 + lane, src, valid);
                              });
              return;
            }
            forEachPack<MR>(a, b, (kSplit + i * S) * kGroupsAhead, kPacks, M, g, q,
                            [&](int u, int j, const Pack* src, bool valid) {
                              copyPack(st + (u * kPer + j) * 32, src, valid);
                            });
          },
          [&](const Pack* st) {
            MmaLoads<MR> L;
            if (rowCopies) {
              const Pack* w = st - lane;
#pragma unroll
              for (int u = 0; u < kGroupsAhead; ++u) {
#pragma unroll
                for (int j = 0; j < kSub; ++j) L.p[u][j] = w[(j * E + g) * 8 + ((u * 4 + q) ^ g)];
#pragma unroll
                for (int h = 0; h < MR / 8; ++h) L.p[u][kSub + h] = w[kTileCols * 8 + (u * (MR / 8) + h) * 32 + lane];
              }
              mmaBatch<T, MR>(d, L);
              return;
            }
#pragma unroll
            for (int u = 0; u < kGroupsAhead; ++u)
#pragma unroll
              for (int i = 0; i < kPer; ++i) L.p[u][i] = st[(u * kPer + i) * 32];
            mmaBatch<T, MR>(d, L);
          });
    }
    // Without a ring: batches kSplit, kSplit + S, ... of this warp, one batch's loads in
    // flight ahead in registers. With one, the ring above has run every batch, so the loop
    // starts past the end and runs none.
    int batch = stages > 0 ? kBatches : kSplit;
    MmaLoads<MR> cur;
    if (batch < kBatches) loadBatch<MR>(cur, a, b, batch * kGroupsAhead, kPacks, M, g, q);
    while (batch < kBatches) {
      const int next = batch + S;
      MmaLoads<MR> ahead;
      if (next < kBatches) loadBatch<MR>(ahead, a, b, next * kGroupsAhead, kPacks, M, g, q);
      mmaBatch<T, MR>(d, cur);
      if (next < kBatches) cur = ahead;
      batch = next;
    }
    // The tile's sums: every warp's fragments into red[], then each pack (row, part)
    // summed over the slot's warps in order, rounded once, kept and pushed.
    float* mine = red[warp];
#pragma unroll
    for (int j = 0; j < kSub; ++j) {
      *reinterpret_cast<float2*>(mine + g * kRedStride + j * E + 2 * q) = make_float2(d[j][0], d[j][1]);
      if (MR == 16)
        *reinterpret_cast<float2*>(mine + (g + 8) * kRedStride + j * E + 2 * q) = make_float2(d[j][2], d[j][3]);
    }
    if (S > 1)
      namedBarrier(1 + slot, S * 32);
    else
      __syncwarp();
    for (int i = slotThread; i < M * kSub; i += S * 32) {
      const int m = i / kSub, j = i % kSub, part = tile * kSub + j;
      if (part >= parts) continue;
      float s[E];
#pragma unroll
      for (int c = 0; c < E; ++c) s[c] = red[slot * S][m * kRedStride + j * E + c];
      for (int w = 1; w < S; ++w)
#pragma unroll
        for (int c = 0; c < E; ++c) s[c] += red[slot * S + w][m * kRedStride + j * E + c];
      const Pack p = dev::toPack<T>(s);  // the rank's partial, rounded once
      own[((slot * perSlot + n) * kSub + j) * MR + m] = p;
      const Pack pushed = dev::notEmpty(p);
      const size_t pk = size_t(m) * size_t(parts) + size_t(part);
      run.buf = awaitRunIndex(index, epoch);
#pragma unroll 8
      for (int jr = 1; jr < W; ++jr) run.slot((rank + jr) % W, run.buf, 0, rank)[pk] = pushed;
    }
    if (S > 1)  // red[] is rewritten by the slot's next tile
      namedBarrier(1 + slot, S * 32);
    else
      __syncwarp();
  }
  dev::allowDependentLaunch();
  namedBarrier(kFinalBarrier, kData);  // own[] complete
  run.buf = awaitRunIndex(index, epoch);
  const auto locate = [&](int i, int& m, int& part) {  // own[]: [slot][n-th tile][part][row]
    m = i % MR;
    const int j = (i / MR) % kSub, sn = i / (MR * kSub), sl = sn / perSlot;
    const int tile = sl * int(gridDim.x) + int(blockIdx.x) + (sn % perSlot) * stride;
    part = tile * kSub + j;
    return tile < tiles && part < parts && m < M;
  };
  if (normInside)
    gemv::finishNormed<T, NR, MR>(channel, run, own, slots * perSlot * kSub * MR, kData, kFinalBarrier, N, M, norm,
                                  epoch, &red[0][0], locate);
  else
    gemv::finishPacks<T, NR>(channel, run, own, slots * perSlot * kSub * MR, kData, N, out, fp32Out, locate);
}

// The launch of a call: the form, rows of the instantiation (MR), warps per tile S,
// grid, tiles per slot and the partials' shared memory. S: the one that gives the slots
// the least work, perSlot tiles of K / S each (ties: fewer warps per tile), among those
// that leave each warp at least kMinIterations batches of loads of B per lane (fewer
// leave its loads no time to overlap). On 2 H100s, S = 1 everywhere kept 640 of a
// 128-CTA grid's 1024 warps busy at N = 5120 and took 60.1 us where cuBLAS alone took
// 53.4 at K = 13824 (docs/perf-log.md, 2026-11-26).
// stages, rotate, rowCopies: how the warps stream B (tuning::chooseGemvStream), the
// rings after the partials in at most kSmemLimit of shared memory: 200 KiB of the 227 a
// Hopper CTA may take, which leaves room for the static red[] (at most 20.5 KiB).
constexpr int kMinIterations = 4;
constexpr size_t kSmemLimit = size_t(200) << 10;  // the kernels' dynamic + static shared memory
struct Shape {
  bool mma;
  int rows, S, perSlot, stages, ringAt, prefetch;
  bool rotate, rowCopies;
  size_t grid, smem;
};
size_t staticSmem(const Shape& s);
Shape shapeOf(const DeviceComm& dc, const GemvAllReduceArgs& g) {
  Shape s{};
  s.mma = g.M > kGemvFmaMaxRowsInstantiated || g.form == GemvForm::Mma ||
          (g.form == GemvForm::Auto && tuning::gemvAllReduceMma(g.M, g.N, g.K, dc.maxCtas));
  const size_t parts = g.N / E, kPacks = g.K / E;
  // Tiles (of 8 or 32 columns) and batches of loads of K per lane (8 or 64 elements).
  const size_t tiles = s.mma ? (parts + kSub - 1) / kSub : parts;
  const size_t batches = s.mma ? kPacks / (4 * kGroupsAhead) : kPacks / 32;
  s.rows = s.mma ? (g.M <= 8 ? 8 : 16) : g.M <= 1 ? 1 : g.M <= 2 ? 2 : 4;
  s.grid = std::min<size_t>(size_t(dc.maxCtas), std::max<size_t>(1, tiles));
  auto perSlot = [&](int S) { return (tiles + s.grid * size_t(kWarps / S) - 1) / (s.grid * size_t(kWarps / S)); };
  s.S = 1;
  for (int S = 2; S <= kWarps && batches >= size_t(S) * kMinIterations; S *= 2)
    if (perSlot(S) * size_t(s.S) < perSlot(s.S) * size_t(S)) s.S = S;  // perSlot / S smaller
  if (g.warpsPerTile > 0) s.S = std::min(g.warpsPerTile, kWarps);  // FC_GEMV_WARPS_PER_TILE
  s.perSlot = int(perSlot(s.S));
  const size_t slots = size_t(kWarps / s.S);
  s.smem = slots * size_t(s.perSlot) * size_t(s.mma ? kSub : 1) * size_t(s.rows) * sizeof(Pack);
  // The rings after the partials, 128-byte aligned.
  const size_t ownEnd = (s.smem + 127) / 128 * 128;
  const size_t stageBytes =
      size_t(kWarps) * 32 * sizeof(Pack) * size_t(s.mma ? kGroupsAhead * (kSub + s.rows / 8) : E + s.rows);
  const size_t room = kSmemLimit > ownEnd + staticSmem(s) ? kSmemLimit - ownEnd - staticSmem(s) : 0;
  tuning::GemvStreamQuery q;
  q.mma = s.mma;
  q.K = g.K;
  q.tiles = tiles;
  q.grid = s.grid;
  // Tiles go to the CTAs first, then to their slots: the busiest CTA has ceil(tiles /
  // grid) of them, on as many slots as it has (perSlot tiles a slot).
  q.busyWarps = std::min<size_t>(size_t(kWarps), (tiles + s.grid - 1) / s.grid * size_t(s.S));
  q.warpBatches = (batches + size_t(s.S) - 1) / size_t(s.S);
  q.warpStageBytes = stageBytes / size_t(kWarps);
  q.fitStages = room / stageBytes;
  q.stages = g.stages;
  q.rotate = g.rotate;
  q.rowCopies = g.rowCopies;
  q.prefetch = g.prefetch;
  const tuning::GemvStream c = tuning::chooseGemvStream(q);
  s.stages = c.stages;
  s.rotate = c.rotate;
  s.rowCopies = c.rowCopies;
  s.ringAt = int(ownEnd / sizeof(Pack));
  s.prefetch = c.prefetch;
  if (s.stages > 0) s.smem = ownEnd + size_t(s.stages) * stageBytes;
  return s;
}

// The kernels' static shared memory: red[] (also finishNormed's scratch) and the RunIndex,
// up to the dynamic part's 128-byte alignment.
size_t staticSmem(const Shape& s) {
  const size_t red = s.mma ? size_t(kWarps) * size_t(s.rows) * kRedStride * sizeof(float)
                           : size_t(kWarps) * size_t(s.rows) * E * sizeof(float);
  return (red + sizeof(RunIndex) + 127) / 128 * 128;
}

template <typename T, int MR, bool Mma>
fcResult_t launchRows(const DeviceComm& dc, int channel, const GemvAllReduceArgs& g, const Shape& s, uint32_t sig,
                      bool pdl, cudaStream_t stream) {
  static_assert(kData + dev::kCallWarpThreads <= dev::kLamportMaxThreads, "a CTA's threads");
  return byWorldSize(dc.nranks, [&](auto nr) {
    constexpr int NR = decltype(nr)::value;
    const dim3 grid(unsigned(s.grid)), block(unsigned(kData + dev::kCallWarpThreads));
    const T* A = static_cast<const T*>(g.A);
    const T* B = static_cast<const T*>(g.B);
    const NormCall norm = g.norm != nullptr ? *g.norm : NormCall{};
    if constexpr (Mma)
      return launchKernelExSmem(gemvMmaAllReduceKernel<T, NR, MR>, grid, block, s.smem, stream, pdl, dc, channel, A, B,
                                g.out, g.fp32Out, int(g.M), int(g.N), int(g.K), s.S, s.perSlot, s.stages, s.ringAt,
                                s.rotate, s.rowCopies, s.prefetch, norm, g.norm != nullptr, sig);
    else
      return launchKernelExSmem(gemvAllReduceKernel<T, NR, MR>, grid, block, s.smem, stream, pdl, dc, channel, A, B,
                                g.out, g.fp32Out, int(g.M), int(g.N), int(g.K), s.S, s.perSlot, s.stages, s.ringAt,
                                s.rotate, s.prefetch, norm, g.norm != nullptr, sig);
  });
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(gemvAllReduceKernel<__nv_bfloat16, 2, 1>);

fcResult_t prepareGemvAllReduce() {
  const auto allow = [](auto kernel) {
    FC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemLimit)));
    return fcSuccess;
  };
  const auto forType = [&](auto tag) -> fcResult_t {
    using T = decltype(tag);
    for (int nranks : {1, 2, 4, 8}) {
      FC_CHECK(byWorldSize(nranks, [&](auto nr) -> fcResult_t {
        constexpr int NR = decltype(nr)::value;
        FC_CHECK(allow(gemvAllReduceKernel<T, NR, 1>));
        FC_CHECK(allow(gemvAllReduceKernel<T, NR, 2>));
        FC_CHECK(allow(gemvAllReduceKernel<T, NR, 4>));
        FC_CHECK(allow(gemvMmaAllReduceKernel<T, NR, 8>));
        return allow(gemvMmaAllReduceKernel<T, NR, 16>);
      }));
    }
    return fcSuccess;
  };
  FC_CHECK(forType(__nv_bfloat16{}));
  return forType(__half{});
}

bool gemvAllReduceFits(const DeviceComm& dc, const GemvAllReduceArgs& g) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  // Sizes as the kernel's int arithmetic takes them; every pack of C in one Lamport
  // slot; the partials, the rings and the kernel's own arrays in kSmemLimit (the kernels
  // may take it: prepareGemvAllReduce).
  const Shape s = shapeOf(dc, g);
  // (One rank only where FC_MMAR_ALGO=fused forces it: tuning::chooseMatmulAllReduce.)
  return dc.nranks >= 1 && (g.datatype == fcBfloat16 || g.datatype == fcFloat16) && g.transB == fcOpT && g.M >= 1 &&
         g.M <= kGemvAllReduceMaxRows && g.N % E == 0 && g.K % E == 0 && g.N < (size_t(1) << 28) &&
         g.K < (size_t(1) << 28) && aligned(g.A) && aligned(g.B) && aligned(g.out) &&
         g.M * g.N * 2 <= lamportSlotBytes(dc.nranks) && s.smem + staticSmem(s) <= kSmemLimit;
}

fcResult_t launchGemvAllReduce(const DeviceComm& dc, int channel, const GemvAllReduceArgs& g, uint32_t sig, bool pdl,
                               cudaStream_t stream) {
  return withElementType(g.datatype, "GEMV + all-reduce", [&](auto tag) -> fcResult_t {
    using T = decltype(tag);
    if constexpr (sizeof(T) != 2) {
      return setError(fcInternalError, "GEMV + all-reduce: 16-bit types only");
    } else {
      const Shape s = shapeOf(dc, g);
      if (s.mma)
        return s.rows == 8 ? launchRows<T, 8, true>(dc, channel, g, s, sig, pdl, stream)
                           : launchRows<T, 16, true>(dc, channel, g, s, sig, pdl, stream);
      return s.rows == 1   ? launchRows<T, 1, false>(dc, channel, g, s, sig, pdl, stream)
             : s.rows == 2 ? launchRows<T, 2, false>(dc, channel, g, s, sig, pdl, stream)
                           : launchRows<T, 4, false>(dc, channel, g, s, sig, pdl, stream);
    }
  });
}

}  // namespace fc
