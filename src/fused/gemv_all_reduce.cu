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
// forms, whose residual + RMSNorm kernel adds the residual and rounds once.
//
// Work: a CTA of kWarps warps takes `tpg` tiles at a time (a tile group), kWarps / tpg
// warps per tile splitting K; CTAs take tile groups in turn. The grid is at most
// maxCtas (<= 128) CTAs of one per SM, all resident: a CTA waits only for the same
// tiles of its peers' CTAs, which are resident too and compute them in the same order.
// The Rows kind's bookkeeping is the rank's (any grid): every CTA reads the buffer
// index, the last to arrive moves it on, and readers clear the packs they read.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "collectives/dispatch.cuh"
#include "collectives/lamport.cuh"
#include "collectives/launch.h"
#include "core/preload.h"
#include "fused/fused.h"

namespace fc {
namespace {

using dev::Pack;
constexpr int E = 8;  // elements of a 16-bit type in a pack: a tile's columns

// Warps of a CTA: 16 for one or two rows (more loads in flight per SM), 8 above
// (their accumulators and A's rows in registers leave room for fewer threads).
template <int MR>
constexpr int warpsFor() {
  return MR <= 2 ? 16 : 8;
}

__device__ __forceinline__ void namedBarrier(unsigned threads) {
  asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
}

// acc[m][c] += row m of A's pack . column c's pack of B (8 elements each), fp32.
template <typename T, int MR>
__device__ __forceinline__ void fmaPacks(float (&acc)[MR][E], const Pack (&a)[MR], const Pack (&b)[E], int M) {
  float bf[E][E];
#pragma unroll
  for (int c = 0; c < E; ++c) {
    const T* be = reinterpret_cast<const T*>(&b[c]);
#pragma unroll
    for (int e = 0; e < E; ++e) bf[c][e] = dev::toFloat(be[e]);
  }
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    if (m >= M) break;
    const T* ae = reinterpret_cast<const T*>(&a[m]);
    float af[E];
#pragma unroll
    for (int e = 0; e < E; ++e) af[e] = dev::toFloat(ae[e]);
#pragma unroll
    for (int c = 0; c < E; ++c)
#pragma unroll
      for (int e = 0; e < E; ++e) acc[m][c] = fmaf(af[e], bf[c][e], acc[m][c]);
  }
}

// out: C [M, N] in T, or (fp32Out) the fp32 sums [M, N]. tpg: tiles per group (a
// power of two dividing kWarps).
template <typename T, int NR, int MR>
__global__ void __launch_bounds__(warpsFor<MR>() * 32 + dev::kCallWarpThreads, 1)
    gemvAllReduceKernel(DeviceComm dc, int channel, const T* A, const T* B, void* out, bool fp32Out, int M, int N,
                        int K, int tpg, uint32_t sig) {
  constexpr int kWarps = warpsFor<MR>(), kData = kWarps * 32;
  __shared__ float red[kWarps][MR * E];
  extern __shared__ Pack own[];  // this CTA's rounded partials, [group of the CTA][tile][row]
  const int W = NR > 0 ? NR : dc.nranks;
  const int rank = dc.rank, warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  const int S = kWarps / tpg;  // warps per tile
  const int tiles = N / E, groups = (tiles + tpg - 1) / tpg, kPacks = K / E;
  // Programmatic dependent launch: A (the previous kernel's output, typically) and the
  // Lamport state are read only after the previous grid has completed.
  dev::waitForPreviousGrid();
  dev::LamportRun<dev::LamportKind::Rows> run(dc, channel);
  __syncthreads();  // every thread has read the buffer index
  if (threadIdx.x >= unsigned(kData)) {
    // CTA 0's call warp checks the call against the peers' (shape signature); the data
    // threads never wait for it (a mismatch ends their waits through the error guard).
    if (blockIdx.x == 0) {
      dev::LamportCall call(dc, channel, sig, uint64_t(M) * uint64_t(N));
      call.run(Op::MatmulAllReduce, channel);
    }
    return;
  }
  uint32_t before = 0;
  if (threadIdx.x == 0) before = run.arrive();
  const int tileOfWarp = warp / S, kSplit = warp % S;
  const Pack* a = reinterpret_cast<const Pack*>(A);
  int ownGroups = 0;
  for (int g = int(blockIdx.x); g < groups; g += int(gridDim.x), ++ownGroups) {
    const int tile = g * tpg + tileOfWarp;
    float acc[MR][E];
#pragma unroll
    for (int m = 0; m < MR; ++m)
#pragma unroll
      for (int c = 0; c < E; ++c) acc[m][c] = 0.f;
    if (tile < tiles) {
      const Pack* b = reinterpret_cast<const Pack*>(B + size_t(tile) * E * size_t(K));
#pragma unroll 2
      for (int kp = kSplit * 32 + lane; kp < kPacks; kp += S * 32) {
        Pack bp[E], ap[MR];
        // B is read once: streamed past L1 (evict first); A's rows are shared by every
        // tile and stay cached.
#pragma unroll
        for (int c = 0; c < E; ++c) {
          const int4 v = __ldcs(reinterpret_cast<const int4*>(b + size_t(c) * kPacks + kp));
          bp[c] = Pack{uint32_t(v.x), uint32_t(v.y), uint32_t(v.z), uint32_t(v.w)};
        }
#pragma unroll
        for (int m = 0; m < MR; ++m)
          if (m < M) {
            const int4 v = __ldg(reinterpret_cast<const int4*>(a + size_t(m) * kPacks + kp));
            ap[m] = Pack{uint32_t(v.x), uint32_t(v.y), uint32_t(v.z), uint32_t(v.w)};
          }
        fmaPacks<T, MR>(acc, ap, bp, M);
      }
    }
    // The tile's sums: over the lanes of each warp, then over its S warps in order.
#pragma unroll
    for (int m = 0; m < MR; ++m)
#pragma unroll
      for (int c = 0; c < E; ++c) {
        float v = acc[m][c];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) red[warp][m * E + c] = v;
      }
    namedBarrier(kData);
    const int t = int(threadIdx.x);
    if (t < tpg * MR) {
      const int tt = t / MR, m = t % MR, tl = g * tpg + tt;
      if (tl < tiles && m < M) {
        float s[E];
#pragma unroll
        for (int c = 0; c < E; ++c) {
          s[c] = 0.f;
          for (int w = 0; w < S; ++w) s[c] += red[tt * S + w][m * E + c];
        }
        const Pack p = dev::toPack<T>(s);  // the rank's partial, rounded once
        own[ownGroups * tpg * MR + t] = p;
        // Into our slot of every peer's current buffer, now: the peers poll for it.
        const Pack pushed = dev::notEmpty(p);
        const size_t pk = size_t(m) * size_t(tiles) + size_t(tl);
#pragma unroll 8
        for (int j = 1; j < W; ++j) run.slot((rank + j) % W, run.buf, 0, rank)[pk] = pushed;
      }
    }
    namedBarrier(kData);  // red[] is rewritten by the next group
  }
  // The next kernel may launch; it waits for this grid (griddepcontrol.wait).
  dev::allowDependentLaunch();
  if (threadIdx.x == 0) run.advanceIfLast(before);
  // Every pack of this CTA's tiles: the peers' partials (polled), ours, summed in rank
  // order, stored. A wait that gives up has recorded the error: the thread stops.
  for (int i = int(threadIdx.x); i < ownGroups * tpg * MR; i += kData) {
    const int g = int(blockIdx.x) + (i / (tpg * MR)) * int(gridDim.x), tt = (i % (tpg * MR)) / MR, m = i % MR;
    const int tl = g * tpg + tt;
    if (tl >= tiles || m >= M) continue;
    const size_t pk = size_t(m) * size_t(tiles) + size_t(tl);
    float acc[E];
    if (!run.template sumInRankOrder<T, NR>(Op::MatmulAllReduce, channel, 0, pk, own[i], acc)) return;
    run.clearRead(pk);
    const size_t at = size_t(m) * size_t(N) + size_t(tl) * E;
    if (fp32Out) {
      float4* o = reinterpret_cast<float4*>(static_cast<float*>(out) + at);
      o[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      o[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    } else {
      *reinterpret_cast<Pack*>(static_cast<T*>(out) + at) = dev::toPack<T>(acc);
    }
  }
}

// The launch of a call: rows of the instantiation (MR), tiles per group (K split over as
// many warps as give every lane at least one pack), grid, and the partials' shared
// memory.
struct Shape {
  int rows, warps, tpg;
  size_t grid, smem;
};
Shape shapeOf(const DeviceComm& dc, const GemvAllReduceArgs& g) {
  Shape s{};
  s.rows = g.M <= 1 ? 1 : g.M <= 2 ? 2 : g.M <= 4 ? 4 : 8;
  s.warps = s.rows <= 2 ? warpsFor<2>() : warpsFor<8>();
  int S = s.warps;
  while (S > 1 && size_t(S) * 32 * E > g.K) S /= 2;
  s.tpg = s.warps / S;
  const size_t tiles = g.N / E, groups = (tiles + size_t(s.tpg) - 1) / size_t(s.tpg);
  s.grid = groups < size_t(dc.maxCtas) ? groups : size_t(dc.maxCtas);
  s.smem = (groups + s.grid - 1) / s.grid * size_t(s.tpg) * size_t(s.rows) * sizeof(Pack);
  return s;
}

template <typename T, int MR>
fcResult_t launchRows(const DeviceComm& dc, int channel, const GemvAllReduceArgs& g, const Shape& s, uint32_t sig,
                      bool pdl, cudaStream_t stream) {
  static_assert(warpsFor<MR>() * 32 + dev::kCallWarpThreads <= dev::kLamportMaxThreads, "a CTA's threads");
  return byWorldSize(dc.nranks, [&](auto nr) {
    constexpr int NR = decltype(nr)::value;
    return launchKernelExSmem(gemvAllReduceKernel<T, NR, MR>, dim3(unsigned(s.grid)),
                              dim3(unsigned(s.warps * 32 + dev::kCallWarpThreads)), s.smem, stream, pdl, dc, channel,
                              static_cast<const T*>(g.A), static_cast<const T*>(g.B), g.out, g.fp32Out, int(g.M),
                              int(g.N), int(g.K), s.tpg, sig);
  });
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(gemvAllReduceKernel<__nv_bfloat16, 2, 1>);

bool gemvAllReduceFits(const DeviceComm& dc, const GemvAllReduceArgs& g) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  // Sizes as the kernel's int arithmetic takes them; every pack of C in one Lamport
  // slot; the partials in at most 48 KiB of shared memory.
  return dc.nranks >= 2 && (g.datatype == fcBfloat16 || g.datatype == fcFloat16) && g.transB == fcOpT && g.M >= 1 &&
         g.M <= kGemvAllReduceMaxRows && g.N % E == 0 && g.K % E == 0 && g.N < (size_t(1) << 28) &&
         g.K < (size_t(1) << 28) && aligned(g.A) && aligned(g.B) && aligned(g.out) &&
         g.M * g.N * 2 <= lamportSlotBytes(dc.nranks) && shapeOf(dc, g).smem <= (size_t(48) << 10);
}

fcResult_t launchGemvAllReduce(const DeviceComm& dc, int channel, const GemvAllReduceArgs& g, uint32_t sig, bool pdl,
                               cudaStream_t stream) {
  return withElementType(g.datatype, "GEMV + all-reduce", [&](auto tag) -> fcResult_t {
    using T = decltype(tag);
    if constexpr (sizeof(T) != 2) {
      return setError(fcInternalError, "GEMV + all-reduce: 16-bit types only");
    } else {
      const Shape s = shapeOf(dc, g);
      return s.rows == 1   ? launchRows<T, 1>(dc, channel, g, s, sig, pdl, stream)
             : s.rows == 2 ? launchRows<T, 2>(dc, channel, g, s, sig, pdl, stream)
             : s.rows == 4 ? launchRows<T, 4>(dc, channel, g, s, sig, pdl, stream)
                           : launchRows<T, 8>(dc, channel, g, s, sig, pdl, stream);
    }
  });
}

}  // namespace fc
