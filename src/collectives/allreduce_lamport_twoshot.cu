// Lamport two-shot all-reduce: fcAllReduce above the one-shot (at up to 4 ranks).
//
// A two-shot (reduce-scatter, then all-gather of the reduced slices: 2(W-1)/W of the
// buffer per rank over NVLink instead of the one-shot's W-1 times it) without a
// single flag or barrier, on the Lamport push buffers of collectives/lamport.cuh:
//   1. every rank pushes slice s of its input into its slot of rank s's
//      reduce-scatter set (set 0 of this kind);
//   2. rank r polls that set for every peer's piece of slice r, adds its own input,
//      rounds once, stores the result into its recvbuff and pushes it into its slot
//      of every peer's all-gather set (set 1);
//   3. rank r polls its all-gather set for every peer's reduced slice and stores them.
// The data is its own flag, so the only waits are for data that is on its way: no
// round trip of a barrier (three per pass in the SM two-shot) and no staging copy.
// The price is the reset: a run rewrites, with all-ones, the 2(W-1) slots its
// previous run consumed (local stores, issued while this run's pushes are in flight).
// Buffers larger than W slices of kLamportTwoShotSliceBytes (4 MiB at 4 ranks) run as
// passes of W slices, one run of the protocol each, inside one kernel: CTAs move on
// independently, so the phases of consecutive passes overlap across CTAs.
//
// Reuse of the three buffers follows the one-shot's argument (design.md): a peer's
// run j+1 needs our run-(j+1) reduce-scatter pushes to finish, so no peer is ever
// more than one run ahead, and the buffer our previous run used is free to reset.
// Chunk c of a slice is CTA c % maxCtas's in every phase and on every rank, so CTAs
// only ever wait for the same CTA of their peers. Mismatched calls are caught by the
// call warp's headers (lamport.cuh, LamportCall).
#include "collectives/chunks.cuh"
#include "collectives/collectives.h"
#include "collectives/dispatch.cuh"
#include "collectives/lamport.cuh"
#include "collectives/launch.h"
#include "core/preload.h"
#include "core/result.h"

namespace fc {
namespace {

using dev::kThreads;

using Run = dev::LamportRun<dev::LamportKind::TwoShot>;

// Elements per slice of a pass of `count` elements: count/nranks rounded up to whole
// 16-byte packs.
__host__ __device__ inline size_t lamportTwoShotSlice(size_t count, int nranks, size_t elemBytes) {
  const size_t perPack = size_t(dev::kPackBytes) / elemBytes, w = size_t(nranks);
  return ((count + w - 1) / w + perPack - 1) / perPack * perPack;
}

// One pass: the all-reduce of in[0, count) into out, as slices of `slice` elements
// (a whole number of packs, at most a slot), by the data threads. Returns true when
// a wait gave up.
template <typename T, int NR>
__device__ __forceinline__ bool twoShotPass(const DeviceComm& dc, Op op, int channel, const Run& run,
                                            const T* in, T* out, size_t count, size_t slice, bool vecIn,
                                            bool vecOut) {
  constexpr int E = dev::PackTraits<T>::kElems;
  const int W = NR > 0 ? NR : dc.nranks;
  const int rank = dc.rank;
  const size_t packs = slice / E;  // per slice
  // Elements of slice s that exist: [s*slice, s*slice + sliceLen(s)).
  auto sliceLen = [&](int s) -> size_t {
    const size_t begin = size_t(s) * slice;
    return begin >= count ? 0 : (count - begin < slice ? count - begin : slice);
  };
  auto slotPacks = [&](int owner, int set, int sender) { return run.slot(owner, run.buf, set, sender); };

  const unsigned threads = dev::lamportDataThreads();

  // 1. Reduce-scatter pushes: slice s of our input into our slot of rank s's set 0
  //    (past the end of the input: zeros, so that every polled pack gets written).
  //    With the world size known at compile time, each peer's slot is computed once
  //    (PeerSlots: the addresses stay in registers). Computed per push, with
  //    LamportRun's register copies of the fields, they cost registers and spills: 15.3
  //    instead of 13.8 us at 4 ranks, 2 MiB (4 H200s, 7607c94 against the tree before).
  if constexpr (NR > 0) {
    const dev::PeerSlots<NR - 1> to = run.template pushSlots<NR>(0, run.buf);
    for (size_t k = threadIdx.x;; k += threads) {
      const size_t pk = run.ownedPack(k);
      if (pk >= packs) break;
#pragma unroll
      for (int j = 0; j < NR - 1; ++j) {
        const int s = (rank + 1 + j) % NR;
        const dev::Pack v = dev::loadInputPack(in + size_t(s) * slice, pk * E, sliceLen(s), vecIn);
        to.p[j][pk] = dev::notEmpty(v);
      }
    }
  } else {
    for (size_t k = threadIdx.x;; k += threads) {
      const size_t pk = run.ownedPack(k);
      if (pk >= packs) break;
      for (int j = 1; j < W; ++j) {
        const int s = (rank + j) % W;
        const dev::Pack v = dev::loadInputPack(in + size_t(s) * slice, pk * E, sliceLen(s), vecIn);
        slotPacks(s, 0, rank)[pk] = dev::notEmpty(v);
      }
    }
  }

  // Reset our previous run's slots while the pushes are on their way.
  run.template resetStale<NR>();

  // 2. Reduce our slice: our own input plus every peer's piece; store it and push it
  //    into our slot of every peer's set 1.
  const T* mine = in + size_t(rank) * slice;
  // NR > 0: the peers' slots of set 0 here (polled) and ours in theirs of set 1 (pushed).
  const dev::PeerSlots<NR - 1> from = run.template ownSlots<NR>(0, run.buf);
  const dev::PeerSlots<NR - 1> to = run.template pushSlots<NR>(1, run.buf);
  for (size_t k = threadIdx.x;; k += threads) {
    const size_t pk = run.ownedPack(k);
    if (pk >= packs) break;
    float acc[E];
#pragma unroll
    for (int e = 0; e < E; ++e) acc[e] = 0.f;
    if constexpr (NR > 0) {
      dev::PeerPacks<NR - 1> peers;
      run.template lookAtPeers<NR>(from, pk, peers);
      dev::accumulate<T>(acc, dev::loadInputPack(mine, pk * E, sliceLen(rank), vecIn));
      if (!run.waitForPeers(op, channel, peers)) return true;
#pragma unroll
      for (int j = 0; j < NR - 1; ++j) dev::accumulate<T>(acc, peers.v[j]);
    } else {
      dev::accumulate<T>(acc, dev::loadInputPack(mine, pk * E, sliceLen(rank), vecIn));
      for (int j = 1; j < W; ++j) {
        const int s = (rank + j) % W;
        const dev::Pack* p = slotPacks(rank, 0, s) + pk;
        dev::Pack v = dev::loadVolatilePack(p);
        if (!dev::pollPack(dc, op, channel, run.buf, p, v, s)) return true;
        dev::accumulate<T>(acc, v);
      }
    }
    // Every rank stores the same bits (an all-ones word becomes the same other NaN).
    const dev::Pack r = dev::notEmpty(dev::toPack<T>(acc));
    if constexpr (NR > 0) {
#pragma unroll
      for (int j = 0; j < NR - 1; ++j) to.p[j][pk] = r;
    } else {
      for (int j = 1; j < W; ++j) slotPacks((rank + j) % W, 1, rank)[pk] = r;
    }
    dev::storePack(out + size_t(rank) * slice, pk * E, sliceLen(rank), r, vecOut);
  }

  // 3. All-gather: every peer's reduced slice from our set 1.
  const dev::PeerSlots<NR - 1> gathered = run.template ownSlots<NR>(1, run.buf);
  for (size_t k = threadIdx.x;; k += threads) {
    const size_t pk = run.ownedPack(k);
    if (pk >= packs) break;
    if constexpr (NR > 0) {
      dev::PeerPacks<NR - 1> peers;
      run.template lookAtPeers<NR>(gathered, pk, peers);
      if (!run.waitForPeers(op, channel, peers)) return true;
#pragma unroll
      for (int j = 0; j < NR - 1; ++j) {
        const int s = (rank + 1 + j) % NR;
        dev::storePack(out + size_t(s) * slice, pk * E, sliceLen(s), peers.v[j], vecOut);
      }
    } else {
      for (int j = 1; j < W; ++j) {
        const int s = (rank + j) % W;
        const dev::Pack* p = slotPacks(rank, 1, s) + pk;
        dev::Pack v = dev::loadVolatilePack(p);
        if (!dev::pollPack(dc, op, channel, run.buf, p, v, s)) return true;
        dev::storePack(out + size_t(s) * slice, pk * E, sliceLen(s), v, vecOut);
      }
    }
  }
  return false;
}

// Chunks of a slot that a pass of `count` elements uses.
template <typename T>
__host__ __device__ size_t passChunks(size_t count, int nranks) {
  constexpr size_t P = dev::LamportTraits<dev::LamportKind::TwoShot>::kChunkPacks;
  const size_t packs = lamportTwoShotSlice(count, nranks, sizeof(T)) / dev::PackTraits<T>::kElems;
  return (packs + P - 1) / P;
}

// Passes of up to nranks slots' worth of elements (passElems), each a run of the
// protocol on the next buffer; every launched CTA takes part in every pass (with no
// chunks when the last pass is short), so the per-CTA buffer sequences stay equal
// on all ranks.
template <typename T, int NR>
__global__ void __launch_bounds__(dev::kLamportMaxThreads)
    allReduceLamportTwoShotKernel(const __grid_constant__ DeviceComm dc, int channel, const T* in, T* out, size_t count,
                                  size_t passElems, uint32_t sig) {
  const int W = NR > 0 ? NR : dc.nranks;
  // Passes start at multiples of passElems, a whole number of packs, and every slice
  // is one too: all are as aligned as the buffers.
  const bool vecIn = dev::aligned16(in), vecOut = dev::aligned16(out);
  dev::waitForPreviousGrid();  // programmatic dependent launch: as the one-shot's
  Run run(dc, channel);
  // The call warp checks the call (once per kernel) while the data threads run the
  // first pass, then joins the CTA-wide steps between passes.
  dev::LamportCall call(dc, channel, sig, count);
  const bool callFailed = call.isCallWarp() && !call.run(opOf(sig), channel);
  for (size_t first = 0; first < count; first += passElems) {
    const size_t n = count - first < passElems ? count - first : passElems;
    bool failed = callFailed;
    if (!call.isCallWarp()) {
      if (first > 0)
        // The previous pass's reset stores (to our buffers) must be performed before
        // this pass's pushes: a peer that sees them may write the reset slots next.
        // (Between kernels, the kernel boundary orders them.)
        __threadfence();
      failed = twoShotPass<T, NR>(dc, opOf(sig), channel, run, in + first, out + first, n,
                                  lamportTwoShotSlice(n, W, sizeof(T)), vecIn, vecOut);
    }
    // Measured: without this CTA-wide step between passes (a thread only ever touches
    // its own packs, so it is not needed for correctness) the threads drift apart and
    // 64-256 MiB took 13-17 % longer (1335 vs 1180 us at 256 MiB).
    if (__syncthreads_or(failed)) return;
    const uint32_t chunks = uint32_t(passChunks<T>(n, W));
    const uint32_t used[2] = {chunks, chunks};
    run.advance(used);
  }
  if (threadIdx.x == 0) run.save();
}

template <typename T>
fcResult_t launch(const DeviceComm& dc, int channel, const void* in, void* out, size_t count, uint32_t sig,
                  bool pdl, cudaStream_t stream) {
  const size_t passElems = size_t(dc.nranks) * (kLamportTwoShotSliceBytes / sizeof(T));
  // Every CTA that ever ran keeps state; the same count gives the same shape on
  // every rank, so the per-CTA buffer sequences stay equal across ranks.
  const dev::LamportShape shape =
      dev::lamportShape(passChunks<T>(count < passElems ? count : passElems, dc.nranks),
                        dev::LamportTraits<dev::LamportKind::TwoShot>::kChunkPacks, dc.maxCtas);
  auto kernel = byWorldSize(dc.nranks, [](auto nr) {
    return allReduceLamportTwoShotKernel<T, decltype(nr)::value>;
  });
  return launchKernelEx(kernel, dim3(shape.grid), dim3(shape.threads), stream, pdl, dc, channel,
                        static_cast<const T*>(in), static_cast<T*>(out), count, passElems, sig);
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(allReduceLamportTwoShotKernel<float, 2>);

fcResult_t launchAllReduceLamportTwoShot(const DeviceComm& dc, int channel, const void* sendbuff,
                                         void* recvbuff, size_t count, fcDataType_t datatype, bool pdl,
                                         cudaStream_t stream, uint32_t callerSig) {
  const uint32_t sig = callerSig != 0 ? callerSig : opSignature(Op::AllReduceTwoShot, uint32_t(datatype), count);
  return withElementType(datatype, "Lamport two-shot all-reduce", [&](auto tag) {
    return launch<decltype(tag)>(dc, channel, sendbuff, recvbuff, count, sig, pdl, stream);
  });
}

}  // namespace fc
