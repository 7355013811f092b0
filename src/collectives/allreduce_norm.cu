// All-reduce + residual add + RMSNorm (fcAllReduceResidualRMSNorm): the decode-path
// sequence of every tensor-parallel transformer layer, as one kernel where it fits a
// Lamport push slot (TensorRT-LLM's / FlashInfer's trtllm_allreduce_fusion idea; our
// own protocol, collectives/lamport.cuh):
//
//   residualOut[t][h] = sum over ranks of in[t][h] + residual[t][h]   (fp32, one rounding)
//   out[t][h] = residualOut[t][h] * rsqrt(mean_h(residualOut[t][h]^2) + eps) * weight[h]
//
// The statistic is taken over the rounded residualOut, as a separate RMSNorm of
// residualOut would, in fp32; out is rounded once. The fp8 variant
// (fcAllReduceResidualRMSNormFp8) writes out / scale as e4m3 (saturated) instead.
//
// Small path (one kernel, no flags, no barrier): the Rows kind of the Lamport protocol
// (lamport.cuh): a row per thread block cluster of up to 8 CTAs (FC_ARNORM_CLUSTER_PACKS
// packs each; 0: one CTA per row), one cluster per row up to maxCtas CTAs, clusters
// taking rows in turn beyond, so that a row's packs land in one cluster. Each CTA pushes
// its share of its rows into every peer's push buffer, then per row polls the peers'
// packs (clearing each once read), sums them with its own in rank order (the same bits
// on every rank), adds the residual (loaded, with the weight, before the polls), stores
// residualOut, and reduces the sum of squares over the row (a warp shuffle, one
// shared-memory step among the data threads, double-buffered by row so that one named
// barrier per row suffices, then the CTAs' totals through distributed shared memory:
// norm_rows.cuh) before it writes out. The Rows state is the rank's (buffer index + an
// arrival counter, lamport.cuh): every CTA's call warp arrives once the CTA has read the
// index, and the last one moves it on. Mismatched calls (another shape, dtype or op)
// are caught by CTA 0's call warp (lamport.cuh, LamportCall): CTA 0 runs in every call
// of every Lamport kernel, so its header sequence is the same on every rank; the
// other CTAs' call warps only arrive.
//
// Above it: the two-shot kernel (allreduce_norm_twoshot.cu), or, unfused
// (residualNormKernel here), an all-reduce into `out` and then a local kernel that adds
// the residual and normalises each row (one CTA per row, rows in turn).
// fc-bench normstages times the small path's stages (device/norm_stages.h).
#include "collectives/chunks.cuh"
#include "collectives/collectives.h"
#include "collectives/dispatch.cuh"
#include "collectives/lamport.cuh"
#include "collectives/lamport_timeline.cuh"
#include "collectives/launch.h"
#include "collectives/norm_rows.cuh"
#include "core/log.h"
#include "core/preload.h"
#include "core/result.h"
#include "tuning/tuning.h"

namespace fc {
namespace {

using dev::Pack;
using norm::ClusterRowSum;
using norm::normRow;
using norm::normRowInRegisters;
using norm::rowSum;
using norm::rowThreads;

// The wide CTAs' threads (launchAllReduceNormLamport): the most a CTA may have.
constexpr int kWideThreads = 1024;

// Rows together, in the wide CTAs (a data thread per pack of rows of 513-992 packs: 5120-
// 7168 in bf16) at 2 ranks, where such a CTA has 2 rows (129-256 rows): the row loop
// (normRow) runs each row's chain in turn - the look at the peers' packs, the wait, the
// sum, the residual, the row's barrier, the normed stores - so a CTA pays a round trip
// and a barrier per row after its pushes; here both rows' loads (the peers' packs, our
// input, the residual) are in flight before the first wait, and one barrier gives both
// rows' sums of squares. The bits are normRow's: the same sums in rank order, the same
// roundings, the same reduction order (rowSums). 2 H200s (fc-bench arnorm, 2026-11-28,
// against the row loop, alternated): 0.95-0.98x at 129-255 rows of 7168, 0.98-0.99 at
// 6144, 0.99-1.00 at 5120. Not in the 512-thread CTAs (rows of up to 4096): there it was
// 1.04-1.19x slower with every row's look up front (+1.0-1.2 us even where one CTA alone
// had two rows) and still 1.01-1.03x with the later row's look at its own wait.
constexpr int kRowsTogether = 2;

template <typename T, int NR>
__device__ __forceinline__ bool normRowsTogether(const dev::LamportRun<dev::LamportKind::Rows>& run, Op op,
                                                 int channel, const NormCall& c, const dev::PeerSlots<NR - 1>& from,
                                                 size_t firstRow, size_t rowStep, size_t rows, size_t begin,
                                                 size_t end, unsigned threads, float invScale, float (*red)[32]) {
  constexpr int E = dev::PackTraits<T>::kElems;
  const size_t rowPacks = c.hidden / E, p = begin + threadIdx.x;
  const bool active = p < end;  // every data thread passes the barrier below
  const Pack* in = static_cast<const Pack*>(c.in);
  const Pack* residual = static_cast<const Pack*>(c.residual);
  dev::PeerPacks<NR - 1> peers[kRowsTogether];
  Pack own[kRowsTogether], res[kRowsTogether];
  Pack weight{0u, 0u, 0u, 0u};
#pragma unroll
  for (int r = 0; r < kRowsTogether; ++r)
    if (active && size_t(r) < rows) {
      const size_t pk = (firstRow + size_t(r) * rowStep) * rowPacks + p;
      run.template lookAtPeers<NR>(from, pk, peers[r]);
      own[r] = in[pk];
      res[r] = residual[pk];
    }
  if (active) weight = static_cast<const Pack*>(c.weight)[p];
  bool failed = false;
  float ss[kRowsTogether];
  Pack x[kRowsTogether];
#pragma unroll
  for (int r = 0; r < kRowsTogether; ++r) {
    ss[r] = 0.f;
    if (!active || size_t(r) >= rows || failed) continue;
    const size_t pk = (firstRow + size_t(r) * rowStep) * rowPacks + p;
    if (!run.waitForPeers(op, channel, peers[r])) {
      failed = true;  // error recorded; this thread stores nothing more
      continue;
    }
    Pack all[NR];  // all[j]: rank (rank + j) % NR's pack
    all[0] = own[r];
#pragma unroll
    for (int j = 0; j < NR - 1; ++j) all[j + 1] = peers[r].v[j];
    float acc[E];
#pragma unroll
    for (int e = 0; e < E; ++e) acc[e] = 0.f;
    dev::accumulateInRankOrder<T, NR>(acc, all, run.rank);
    run.clearRead(from, pk);
    x[r] = norm::addResidual<T>(acc, res[r], ss[r]);
    static_cast<Pack*>(c.residualOut)[pk] = x[r];
  }
  norm::rowSums<kRowsTogether>(ss, red, threads);
  if (failed || !active) return !failed;
#pragma unroll
  for (int r = 0; r < kRowsTogether; ++r)
    if (size_t(r) < rows) {
      const size_t first = (firstRow + size_t(r) * rowStep) * rowPacks;
      const float rstd = rsqrtf(ss[r] / float(c.hidden) + c.eps);
      norm::storeNormed<T>(c, c.out ? static_cast<Pack*>(c.out) + first : nullptr, p, (first + p) * E, x[r], weight,
                           rstd, invScale);
    }
  return true;
}

// kMeasure: stagesArg says which stages run (device/norm_stages.h, fc-bench
// normstages); otherwise every stage, once (kNormFull). Launched in clusters of C CTAs
// (cudaLaunchAttributeClusterDimension): cluster i takes rows i, i + clusters, ...,
// and its CTA of cluster rank r the packs [r * share, (r + 1) * share) of each, so that
// a row's packs are polled by C SMs (TensorRT-LLM's layout).
// kMaxThreads: the CTA's threads at most, the data threads and the call warp
// (kLamportMaxThreads, or kWideThreads for rows that would otherwise leave a CTA's data
// threads two packs each: a register budget of 64 instead of ~96, a few spills).
// kMinBlocks 2: built for two CTAs of kMaxThreads an SM, for grids of more than maxCtas
// CTAs of a row each (tuning::normRowsOwnCtas, FC_ARNORM_ROW_CTAS): at hidden 2048 four
// CTAs an SM. Launched only where a data thread holds one pack of its row, so built with
// normRow's one-pack path alone (no row loop): 52 registers at 2 ranks in bf16 and no
// spills, where the row loop beside it took 56 with 44 bytes spilled (ptxas, CUDA 13.0).
// kTimeline (FC_ARNORM_STAGES=timeline): the production stages with per-CTA phase stamps
// (lamport_timeline.cuh), an instantiation of its own: behind a run-time test in the
// measured kernel, the stamps (the Timeline object, captured by the row's lambda, and the
// printf) took 64 of the 144 bytes of stack that kernel has over the production one
// (ptxas, 2 ranks, bf16), which at world size 1 (no communication) took 0.6-0.8 us more
// than the production kernel at 1-128 rows of 2048-4096 and 1.3-1.9 us at 5120; 0.26-0.64
// without them (perf-log, fifty-second session).
template <typename T, int NR, bool kMeasure, int kMaxThreads, int kMinBlocks = 1, bool kTimeline = false>
__global__ void __launch_bounds__(kMaxThreads, kMinBlocks)
    allReduceNormLamportKernel(DeviceComm dc, int channel, NormCall c, uint32_t sig, uint32_t stagesArg) {
  constexpr int E = dev::PackTraits<T>::kElems;
  __shared__ __align__(16) float red[2][32];
  __shared__ uint64_t clusterSums[2][ClusterRowSum::kMaxCtas];
  namespace cg = cooperative_groups;
  const unsigned ctas = cg::this_cluster().num_blocks(), clusterRank = cg::this_cluster().block_rank();
  const int W = NR > 0 ? NR : dc.nranks;
  const int rank = dc.rank;
  const size_t rowPacks = c.hidden / E;
  const size_t packs = c.tokens * rowPacks;
  const size_t share = (rowPacks + ctas - 1) / ctas;
  const size_t begin = size_t(clusterRank) * share < rowPacks ? size_t(clusterRank) * share : rowPacks;
  const size_t end = begin + share < rowPacks ? begin + share : rowPacks;
  const size_t firstRow = blockIdx.x / ctas, rowStep = gridDim.x / ctas;
  const unsigned threads = dev::lamportDataThreads();
  const Pack* in = static_cast<const Pack*>(c.in);
  // Slots of no row yet (sequence 0), before this CTA tells its cluster it has started
  // (release); the partners write into them only after waiting for that (acquire).
  // The cluster barriers only in a cluster launch (ctas > 1, uniform over the grid):
  // without one, ptxas lowers barrier.cluster.wait to a CTA barrier (bar.sync 0), which
  // the call warp and the data threads would then meet at different instructions
  // (compute-sanitizer's synccheck: "divergent threads in block"), the data threads
  // waiting for the call warp's header exchange before their polls.
  const bool cluster = ctas > 1;
  if (threadIdx.x < 2 * ClusterRowSum::kMaxCtas) (&clusterSums[0][0])[threadIdx.x] = 0u;
  if (cluster) asm volatile("barrier.cluster.arrive.release;" ::: "memory");
  // Programmatic dependent launch: everything above overlapped the previous kernel;
  // nothing it writes (inputs, the Lamport state) is read before this.
  dev::waitForPreviousGrid();
  const uint32_t stages = kMeasure ? stagesArg : uint32_t(kNormFull);
  // FC_ARNORM_STAGES=timeline: phase stamps (lamport_timeline.cuh), begun before the
  // CTA's first barrier below.
  static_assert(!(kMeasure && kTimeline), "the timeline stamps the production stages");
  constexpr bool timeline = kTimeline;
  dev::Timeline tl;
  if constexpr (timeline) tl.begin();
  dev::LamportRun<dev::LamportKind::Rows> run(dc, channel);
  dev::LamportCall call(dc, channel, sig, packs * E);
  const float invScale = c.scale ? 1.f / *c.scale : 1.f;

  // Every thread has read the buffer index before this CTA's arrival lets the last
  // CTA move it on.
  __syncthreads();
  int failed = 0;
  if (call.isCallWarp()) {
    // The last lane arrives; the atomic's round trip overlaps CTA 0's header exchange
    // (lanes < W - 1) instead of following it.
    const bool arriving = threadIdx.x - threads == unsigned(dev::kCallWarpThreads - 1);
    const uint32_t before = arriving ? run.arrive() : 0u;
    if (blockIdx.x == 0) failed = !call.run(opOf(sig), channel);
    if (arriving) run.advanceIfLast(before);
    if (cluster) asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
  } else {
    // 1. Push our share of our rows into our slot of every peer's current buffer (with
    // the world size known at compile time, the slot addresses computed once, here).
    auto pushAll = [&](auto&& push) {
      for (size_t row = firstRow; row < c.tokens && (stages & kNormPush); row += rowStep)
        for (size_t pk = row * rowPacks + begin + threadIdx.x; pk < row * rowPacks + end; pk += threads)
          push(pk, dev::notEmpty(in[pk]));
    };
    if constexpr (NR > 0) {
      const dev::PeerSlots<NR - 1> to = run.template pushSlots<NR>(0, run.buf);
      pushAll([&](size_t pk, const Pack& v) {
#pragma unroll
        for (int j = 0; j < NR - 1; ++j) to.p[j][pk] = v;
      });
    } else {
      pushAll([&](size_t pk, const Pack& v) {
        for (int j = 1; j < W; ++j) run.slot((rank + j) % W, run.buf, 0, rank)[pk] = v;
      });
    }
    if constexpr (timeline) tl.pushed();
    // The next kernel may start launching: it waits (griddepcontrol.wait) for this
    // one to finish before it reads anything.
    dev::allowDependentLaunch();
    // Every CTA of the cluster has started (its slots are ready) before any total is
    // sent to it; long true by now.
    if (cluster) asm volatile("barrier.cluster.wait.acquire;" ::: "memory");

    // 2. Row by row: the peers' packs summed with ours in rank order (the same bits on
    // every rank), each cleared once read, then the residual and the norm.
    const bool clear = stages & kNormReset;
    const dev::PeerSlots<NR - 1> from = run.template ownSlots<NR>(0, run.buf);
    auto sum = [&](size_t pk, float(&acc)[E]) {
      if (!run.template sumInRankOrder<T, NR>(opOf(sig), channel, from, pk, in[pk], acc)) return false;
      if constexpr (timeline) tl.summed();
      if (clear) run.clearRead(from, pk);
      return true;
    };
    // This CTA's rows (the same count on every rank: a function of the shape and the grid).
    const size_t rows = firstRow < c.tokens ? (c.tokens - firstRow + rowStep - 1) / rowStep : 0;
    bool together = false;
    if constexpr (NR == 2 && !kMeasure && kMaxThreads == kWideThreads) {
      together = !cluster && end - begin <= threads && rows >= 2 && rows <= size_t(kRowsTogether);
      if (together) {
        __shared__ __align__(16) float redRows[kRowsTogether][32];
        failed |= !normRowsTogether<T, NR>(run, opOf(sig), channel, c, from, firstRow, rowStep, rows, begin, end,
                                           threads, invScale, redRows);
      }
    }
    int parity = 0;
    for (size_t row = firstRow; !together && row < c.tokens && (stages & kNormSum); row += rowStep, parity ^= 1) {
      const ClusterRowSum total{dc, opOf(sig), channel, clusterSums, red,
                                threads, ctas, clusterRank, parity, uint32_t(row + 1)};
      failed |= !normRow<T, (kMinBlocks > 1)>(c, row, begin, end, threads, failed, invScale, sum, total, stages);
      if constexpr (timeline)
        if (row == firstRow) tl.reset();  // the second stamp: the first row done
    }
    if constexpr (timeline) tl.end(threads, packs * sizeof(Pack), "norm", "first row");
  }
  (void)failed;  // a wait that gave up recorded its error; the Rows state moved on regardless
  // No CTA of a cluster leaves while a partner may still write into its shared memory:
  // in a normal call the last row's totals have all arrived by now, but a CTA that gave
  // up (deadline, abort, a peer's give-up) passes its waits early, and a partner's total
  // stored into a CTA that has exited faults the whole context (seen at 2 ranks on one
  // GPU, where a give-up was provoked: "unspecified launch failure").
  if (cluster) {
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
  }
}

// residualNormKernel's forms with a row in registers (kRegPacks > 0): threads of a CTA.
constexpr unsigned kRegRowThreads = 1024;

// The large path's second half: `sum` holds the all-reduced input (it may be c.out),
// in T, or (S = float: fcMatmulAllReduce's decode kernel) unrounded in fp32.
// kRegPacks > 0 (the fp32 form): a row of at most kRegPacks x kRegRowThreads packs,
// kRegPacks a thread in registers (normRowInRegisters; the row loop not built).
template <typename T, typename S = T, int kRegPacks = 0>
__global__ void __launch_bounds__(kRegPacks > 0 ? kRegRowThreads : unsigned(dev::kThreads))
    residualNormKernel(NormCall c, const S* sum) {
  constexpr int E = dev::PackTraits<T>::kElems;
  __shared__ __align__(16) float red[2][32];
  if constexpr (std::is_same_v<S, float> && !std::is_same_v<T, float>) {
    // Behind fcMatmulAllReduce's decode kernel only, which lets this grid launch after
    // its own griddepcontrol.wait, so every kernel before it has completed: the residual
    // and the weight are final before ours (only the sums are not). Their lines of this
    // CTA's first row (the grid is at most the token count) go into L1 while that kernel
    // still runs (prefetch: no value read), one prefetch per 128-byte line (8 packs).
    const size_t rowPacks = c.hidden / E;
    const Pack* residual = static_cast<const Pack*>(c.residual) + size_t(blockIdx.x) * rowPacks;
    const Pack* weight = static_cast<const Pack*>(c.weight);
    for (size_t p = size_t(threadIdx.x) * 8; p < rowPacks; p += size_t(blockDim.x) * 8) {
      asm volatile("prefetch.global.L1 [%0];" ::"l"(residual + p));
      asm volatile("prefetch.global.L1 [%0];" ::"l"(weight + p));
    }
    // The next kernel may launch now: it still waits for this grid's completion at its
    // own griddepcontrol.wait (every kernel launched with PDL does, launch.h), so only its
    // launch and prologue move under our work - e.g. the next decode kernel's first
    // weight lines into L2. This grid is a CTA a row of at most the decode kernel's rows,
    // all resident from the start, so the next grid's CTAs take no SM it needs.
    dev::allowDependentLaunch();
  }
  dev::waitForPreviousGrid();
  const float invScale = c.scale ? 1.f / *c.scale : 1.f;
  auto load = [&](size_t pk, float(&acc)[E]) {
    if constexpr (std::is_same_v<S, float> && !std::is_same_v<T, float>) {
      const float4* f = reinterpret_cast<const float4*>(sum) + pk * (E / 4);
#pragma unroll
      for (int q = 0; q < E / 4; ++q) {
        const float4 v = f[q];
        acc[4 * q] = v.x, acc[4 * q + 1] = v.y, acc[4 * q + 2] = v.z, acc[4 * q + 3] = v.w;
      }
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) acc[e] = 0.f;
      dev::accumulate<T>(acc, reinterpret_cast<const Pack*>(sum)[pk]);
    }
    return true;
  };
  const size_t rowPacks = c.hidden / E;
  int parity = 0;
  for (size_t row = blockIdx.x; row < c.tokens; row += gridDim.x, parity ^= 1) {
    auto total = [&](float ss, bool&) { return rowSum(ss, red, parity, blockDim.x); };
    if constexpr (kRegPacks > 0)
      normRowInRegisters<T, kRegPacks>(c, row, 0, rowPacks, blockDim.x, false, invScale, load, total, kNormFull);
    else
      normRow<T>(c, row, 0, rowPacks, blockDim.x, false, invScale, load, total);
  }
}

// residualNormKernel over groups of R rows per CTA, for many rows (tuning::
// residualNormRowsPerCta): one row per CTA leaves each thread one or two packs in flight
// and a chain per row (the loads, the row's barrier, the normed stores) with nothing
// behind it, so the kernel streamed at about half the HBM rate (8192 x 4096: 114.5 us for
// its 256 MiB, read and written; perf-log, residualNormRowsPerCta). Here a thread's
// loads of all R rows (the sums and the residual, J packs of each) are in flight before
// the first is used, one named barrier gives the R rows' sums of squares (rowSums), and
// the weight's packs are loaded once per CTA. The bits are residualNormKernel's: the
// same threads per row (rowThreads), the same packs per thread in the same order, the
// same roundings and the same reduction order. In place (residualOut == residual, or
// sum == out) is safe: a thread reads a pack before it writes it, and no other thread
// touches it. Rows: R x J pack loads per thread (J packs of a row: rowPacks <= J x
// blockDim.x).
template <typename T, int R, int J>
__global__ void __launch_bounds__(dev::kThreads) residualNormRowsKernel(NormCall c, const T* sum) {
  constexpr int E = dev::PackTraits<T>::kElems;
  // [parity][row of the group][warp]: a buffer is written again two groups later, after
  // every thread has passed the next group's barrier, so after it read this group's.
  __shared__ __align__(16) float red[2][R][32];
  dev::waitForPreviousGrid();
  const float invScale = c.scale ? 1.f / *c.scale : 1.f;
  const size_t rowPacks = c.hidden / E;
  const unsigned threads = blockDim.x;
  const Pack zero{0u, 0u, 0u, 0u};
  const Pack* weight = static_cast<const Pack*>(c.weight);
  Pack w[J];
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const size_t p = threadIdx.x + size_t(j) * threads;
    w[j] = p < rowPacks ? weight[p] : zero;
  }
  int parity = 0;
  for (size_t row0 = size_t(blockIdx.x) * R; row0 < c.tokens; row0 += size_t(gridDim.x) * R, parity ^= 1) {
    const int rows = c.tokens - row0 < size_t(R) ? int(c.tokens - row0) : R;  // the same in every thread
    Pack s[R][J], r[R][J];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int j = 0; j < J; ++j) {
        const size_t p = threadIdx.x + size_t(j) * threads, at = (row0 + size_t(i)) * rowPacks + p;
        const bool mine = i < rows && p < rowPacks;
        s[i][j] = mine ? reinterpret_cast<const Pack*>(sum)[at] : zero;
        r[i][j] = mine ? static_cast<const Pack*>(c.residual)[at] : zero;
      }
    float ss[R];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      ss[i] = 0.f;
#pragma unroll
      for (int j = 0; j < J; ++j) {
        const size_t p = threadIdx.x + size_t(j) * threads;
        if (i >= rows || p >= rowPacks) continue;
        float acc[E];
#pragma unroll
        for (int e = 0; e < E; ++e) acc[e] = 0.f;
        dev::accumulate<T>(acc, s[i][j]);
        s[i][j] = norm::addResidual<T>(acc, r[i][j], ss[i]);  // s now holds residualOut's pack
        static_cast<Pack*>(c.residualOut)[(row0 + size_t(i)) * rowPacks + p] = s[i][j];
      }
    }
    norm::rowSums<R>(ss, red[parity], threads);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      if (i >= rows) continue;
      const float rstd = rsqrtf(ss[i] / float(c.hidden) + c.eps);
      const size_t first = (row0 + size_t(i)) * rowPacks;
      Pack* out = c.out ? static_cast<Pack*>(c.out) + first : nullptr;  // NULL: the fp8 output instead
#pragma unroll
      for (int j = 0; j < J; ++j) {
        const size_t p = threadIdx.x + size_t(j) * threads;
        if (p < rowPacks) norm::storeNormed<T>(c, out, p, (first + p) * E, s[i][j], w[j], rstd, invScale);
      }
    }
  }
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(residualNormKernel<__nv_bfloat16>);

fcResult_t launchAllReduceNormLamport(const DeviceComm& dc, int channel, const NormCall& c, bool pdl,
                                      uint32_t clusterPacks, bool wideCtas, uint32_t rowCtas, uint32_t stages,
                                      cudaStream_t stream, uint32_t callerSig) {
  const uint32_t sig = callerSig != 0 ? callerSig
                                      : opSignature(Op::AllReduceNorm, uint32_t(c.datatype), shapeKey(c.tokens, c.hidden, 0, 0));
  return withElementType(c.datatype, "all-reduce + RMSNorm", [&](auto tag) {
    using T = decltype(tag);
    // A row over a cluster of CTAs with up to clusterPacks packs each (one per data
    // thread), at most 8; fewer (halved, as TensorRT-LLM does) until a cluster per row
    // fits in maxCtas CTAs; beyond that, clusters take rows in turn. clusterPacks 0:
    // one CTA per row.
    const size_t rowPacks = c.hidden / dev::PackTraits<T>::kElems;
    if (clusterPacks == kNormClusterPacksAuto)
      clusterPacks = tuning::normClusterPacks(rowPacks, size_t(dev::kThreads), wideCtas);
    size_t ctas = clusterPacks ? (rowPacks + clusterPacks - 1) / clusterPacks : 1;
    ctas = ctas < 1 ? 1 : ctas > ClusterRowSum::kMaxCtas ? ClusterRowSum::kMaxCtas : ctas;
    while (ctas > 1 && c.tokens * ctas > size_t(dc.maxCtas)) ctas = (ctas + 1) / 2;
    while (ctas > size_t(dc.maxCtas)) --ctas;
    const uint32_t form = stages & ~uint32_t(kNormSolo);  // solo: a launch form, not a stage
    // A CTA's share of a row past kThreads packs (one CTA per row of 5120-7168 in bf16
    // at 100-160 rows): wideCtas gives it up to kWideThreads threads, one pack per data
    // thread (TensorRT-LLM's way: its CTAs grow as its clusters halve), instead of
    // leaving some data threads two packs to poll one after the other; only where every
    // data thread then has one (tuning).
    constexpr unsigned kWideData = unsigned(kWideThreads - dev::kCallWarpThreads);
    bool wide = false;
    unsigned threads = 0;
    size_t clusters = 0, smem = 0;
    decltype(&allReduceNormLamportKernel<T, 2, false, dev::kLamportMaxThreads>) kernel = nullptr;
    for (;;) {
      const size_t perCluster = size_t(dc.maxCtas) / ctas;
      clusters = c.tokens < perCluster ? c.tokens : perCluster;
      const size_t share = (rowPacks + ctas - 1) / ctas;
      wide = wideCtas && tuning::normWideCtas(share, size_t(dev::kThreads), kWideData);
      threads = rowThreads(share, wide ? kWideData : unsigned(dev::kThreads)) + unsigned(dev::kCallWarpThreads);
      kernel = byWorldSize(dc.nranks, [&](auto nr) {
        constexpr int N = decltype(nr)::value;
        if (form == kNormFull)
          return wide ? allReduceNormLamportKernel<T, N, false, kWideThreads>
                      : allReduceNormLamportKernel<T, N, false, dev::kLamportMaxThreads>;
        if (form == (kNormFull | kNormTimeline))
          return wide ? allReduceNormLamportKernel<T, N, false, kWideThreads, 1, true>
                      : allReduceNormLamportKernel<T, N, false, dev::kLamportMaxThreads, 1, true>;
        return wide ? allReduceNormLamportKernel<T, N, true, kWideThreads>
                    : allReduceNormLamportKernel<T, N, true, dev::kLamportMaxThreads>;
      });
      if (stages & kNormSolo) FC_CHECK(soloSmem(kernel, &smem));
      if (ctas == 1) break;
      // Every cluster resident at once, else fewer CTAs a row (launch.h, residentClusters:
      // the late clusters would wait for the early ones to leave).
      size_t resident = 0;
      FC_CHECK(residentClusters(kernel, unsigned(ctas), threads, smem, &resident));
      if (clusters <= resident) break;
      ctas = (ctas + 1) / 2;
    }
    if (ctas == 1) {
      // A CTA a row: past maxCtas (FC_ARNORM_ROW_CTAS, else where tuning::normRowsOwnCtas
      // takes every row) the kernel built for two CTAs an SM, and never more CTAs than the
      // device holds at once (tuning::normRowCtas).
      // (Not with solo's shared memory: its attribute is set on the kernel chosen above.)
      const bool full = !wide && stages == uint32_t(kNormFull);
      const auto ownCtas = byWorldSize(dc.nranks, [&](auto nr) {
        return allReduceNormLamportKernel<T, decltype(nr)::value, false, dev::kLamportMaxThreads, 2>;
      });
      size_t cap = rowCtas, resident = SIZE_MAX;  // SIZE_MAX: not asked (maxCtas bounds the grid)
      if (cap == 0 && full && c.tokens > size_t(dc.maxCtas)) {
        size_t own = 0;
        FC_CHECK(residentClusters(ownCtas, 1u, threads, smem, &own));
        if (tuning::normRowsOwnCtas(c.tokens, rowPacks, dc.nranks, size_t(dc.maxCtas), size_t(dev::kThreads), own))
          cap = c.tokens, resident = own;
      }
      // (Its rows are one pack a data thread, which it is built for: kOnePackOnly.)
      if (cap > size_t(dc.maxCtas) && full && rowPacks <= size_t(dev::kThreads)) kernel = ownCtas;
      if (cap != 0 && resident == SIZE_MAX) FC_CHECK(residentClusters(kernel, 1u, threads, smem, &resident));
      clusters = tuning::normRowCtas(c.tokens, size_t(dc.maxCtas), cap, resident);
    }
    FC_TRACE("all-reduce + RMSNorm one kernel: %zu x %zu, %zu CTAs of %u threads, clusters of %zu", c.tokens,
             c.hidden, clusters * ctas, threads, ctas);
    // The polls' back-off for this call's rows (the kernel takes the comm by value).
    DeviceComm d = dc;
    d.lamportSpins = tuning::normLamportSpins(c.tokens, dc.lamportSpins, dc.lamportSpinsSet != 0);
    return launchKernelWith(kernel, dim3(unsigned(clusters * ctas)), dim3(threads), unsigned(ctas), smem, stream, pdl,
                            d, channel, c, sig, form);
  });
}

// The Rows kind's layout as LamportRun<Rows> computes it on the device (its slot() and
// state words), for the host.
void* lamportRowsSlot(const DeviceComm& dc, int channel, uint32_t buffer, int owner, int sender) {
  using Traits = dev::LamportTraits<dev::LamportKind::Rows>;
  const int d = sender - owner - 1;
  const size_t peer = size_t(d < 0 ? d + dc.nranks : d);
  const size_t channelOff = dc.lamportOffset + size_t(channel) * lamportChannelBytes(dc.nranks);
  return dc.base + size_t(owner) * dc.stride + channelOff +
         ((size_t(buffer) * kLamportSets + size_t(Traits::kFirstSet)) * lamportPeerSlots(dc.nranks) + peer) *
             lamportSlotBytes(dc.nranks);
}

const uint32_t* lamportRowsIndex(const DeviceComm& dc, int channel) {
  using Traits = dev::LamportTraits<dev::LamportKind::Rows>;
  static_assert(Traits::kWholeRank, "the Rows state is the rank's: CTA 0's words");
  return reinterpret_cast<const uint32_t*>(dc.base + size_t(dc.rank) * dc.stride + kLamportStateOffset) +
         size_t(channel) * kMaxBlocks * kLamportStateWords + Traits::kStateWord;
}

fcResult_t launchResidualNorm(const NormCall& c, const void* sum, bool pdl, cudaStream_t stream, bool fp32Sum,
                              int rowsPerCta) {
  return withElementType(c.datatype, "residual + RMSNorm", [&](auto tag) {
    using T = decltype(tag);
    // One row (or group of rows) per CTA up to a few CTAs per SM; beyond that CTAs take
    // rows in turn.
    constexpr size_t kMaxGrid = 1024;
    const size_t rowPacks = c.hidden / dev::PackTraits<T>::kElems;
    const dim3 block(rowThreads(rowPacks));
    const size_t packsPerThread = (rowPacks + block.x - 1) / block.x;
    const int rows = fp32Sum ? 1 : tuning::residualNormRowsPerCta(c.tokens, rowPacks, packsPerThread, rowsPerCta);
    const size_t groups = (c.tokens + size_t(rows) - 1) / size_t(rows);
    const dim3 grid(unsigned(groups < kMaxGrid ? groups : kMaxGrid));
    const T* s = static_cast<const T*>(sum);
    if (fp32Sum) {
      // Behind the decode kernel (at most 16 rows): past 512 packs the row in registers,
      // one or two packs a thread (tuning::residualNormRegPacks), where the 512-thread
      // kernel's row loop loads a pack's sums only after storing the pack before.
      const float* s32 = static_cast<const float*>(sum);
      const int regPacks = tuning::residualNormRegPacks(rowPacks, kRegRowThreads);
      if (regPacks == 1)
        return launchKernelEx(residualNormKernel<T, float, 1>, grid, dim3(rowThreads(rowPacks, kRegRowThreads)),
                              stream, pdl, c, s32);
      if (regPacks == 2)
        return launchKernelEx(residualNormKernel<T, float, 2>, grid,
                              dim3(rowThreads((rowPacks + 1) / 2, kRegRowThreads)), stream, pdl, c, s32);
      return launchKernelEx(residualNormKernel<T, float>, grid, block, stream, pdl, c, s32);
    }
    if (rows == 4) return launchKernelEx(residualNormRowsKernel<T, 4, 1>, grid, block, stream, pdl, c, s);
    if (rows == 2)
      return packsPerThread == 1 ? launchKernelEx(residualNormRowsKernel<T, 2, 1>, grid, block, stream, pdl, c, s)
                                 : launchKernelEx(residualNormRowsKernel<T, 2, 2>, grid, block, stream, pdl, c, s);
    return launchKernelEx(residualNormKernel<T>, grid, block, stream, pdl, c, s);
  });
}

}  // namespace fc
