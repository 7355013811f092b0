// The Lamport protocol's building blocks, for the Lamport one-shot and two-shot
// all-reduces: push buffers whose data is its own flag.
//
// Buffers. Per channel there are three buffers (used in turn by a CTA's runs), each
// of four sets of one lamportSlotBytes(W) slot per peer of the owner (device_comm.h):
// set 0 is the one-shot's, sets 1 and 2 the two-shot's (its reduce-scatter and
// all-gather pushes), set 3 the all-reduce + RMSNorm's (the Rows kind, below). A word still
// holding kLamportEmpty has not been written: writers never write that word
// (notEmpty), readers poll until no word of a pack holds it, and a run resets what
// the run before it consumed (the Rows kind: what it has just read). No rank pushes to
// itself (its own part is read from its input), so a set has no slot for the owner.
//
// The one-shot, the two-shot and the rows are independent instances of the protocol
// (LamportKind): their own sets, their own per-CTA state (in device memory, private
// to the rank: {buffer index, chunks each set of each buffer last held}), and their
// own chunk size. Chunk c of a slot belongs to CTA c % maxCtas in every run and
// phase of a kind (Rows shares the work differently: LamportTraits), on every rank,
// so a CTA only ever waits for the same CTA of its peers; a CTA walks its chunks with however many threads it was launched with
// (LamportRun::ownedPack). Measured (docs/perf-log.md): 2 KiB chunks spread small
// one-shots over many SMs (256 KiB: 128 CTAs of 128 threads, 5.9 instead of 6.3 us);
// the two-shot's large passes ran 1-2 % faster with 8 KiB chunks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/chunks.cuh"
#include "device/device_comm.h"
#include "device/pdl.cuh"
#include "device/sync.cuh"

namespace fc::dev {

enum class LamportKind { OneShot, TwoShot, Rows };

template <LamportKind K>
struct LamportTraits {
  static constexpr int kSets = K == LamportKind::TwoShot ? 2 : 1;
  static constexpr int kFirstSet = K == LamportKind::OneShot ? 0 : K == LamportKind::TwoShot ? 1 : 3;
  static constexpr int kChunkPacks = K == LamportKind::OneShot ? 128 : 512;
  static constexpr int kStateWord = K == LamportKind::OneShot ? 0 : K == LamportKind::TwoShot ? 8 : 16;
  // Rows (fcAllReduceResidualRMSNorm, allreduce_norm.cu) needs a whole row in one CTA,
  // and rows change length between calls, so no fixed chunk can belong to one CTA in
  // every call. Instead its state is the rank's, not a CTA's: CTA 0's words hold the
  // buffer index and an arrival counter, every CTA of a call reads the index, and the
  // CTA that arrives last moves it on (LamportRun::arrive), so the grid can follow the
  // token count. A thread clears each peer pack right after it has read it
  // (clearRead): the reader of a pack is the only one who knows it is consumed, and
  // the clearing then scales with the call itself, not with the call before. Its own
  // set, so the two ownership rules never meet in one buffer.
  static constexpr bool kWholeRank = K == LamportKind::Rows;
};
static_assert(kLamportSets == 4, "device_comm.h's layout has four sets per buffer");
// Rows: the arrival counter, after its buffer index (word 0 of its 8; 1-3 unused).
constexpr int kRowsCounterWord = 4;
// The call headers' buffer index: the last word of the one-shot's 8 (it uses 4).
constexpr int kCallStateWord = 7;

// Every Lamport CTA has, after its data threads, one warp that checks the call
// (LamportCall): it never touches data, so the data path does not wait for it.
constexpr int kCallWarpThreads = 32;
constexpr int kLamportMaxThreads = kThreads + kCallWarpThreads;

// CTAs and threads for a call whose largest run uses `chunks` chunks of `chunkPacks`
// packs: one CTA per chunk up to maxCtas, each with the data threads for its chunks
// (at most kThreads) and the call warp.
struct LamportShape {
  unsigned grid, threads;
};
// maxDataThreads: kThreads, or for a kernel launched with up to 1024 threads (the
// one-shot's wide measurement form) 1024 less the call warp.
inline LamportShape lamportShape(size_t chunks, int chunkPacks, int maxCtas, int maxDataThreads = kThreads) {
  const size_t grid = chunks < size_t(maxCtas) ? (chunks > 0 ? chunks : 1) : size_t(maxCtas);
  const size_t perCta = (chunks + grid - 1) / grid;
  const size_t threads = perCta * size_t(chunkPacks), cap = size_t(maxDataThreads);
  return {unsigned(grid), unsigned(threads < cap ? threads : cap) + kCallWarpThreads};
}

// The data threads of this CTA (all but the call warp).
__device__ __forceinline__ unsigned lamportDataThreads() { return blockDim.x - kCallWarpThreads; }

__device__ __forceinline__ Pack loadVolatilePack(const Pack* p) {
  Pack v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

__device__ __forceinline__ bool packReady(const Pack& v) {
  return v.x != kLamportEmpty && v.y != kLamportEmpty && v.z != kLamportEmpty && v.w != kLamportEmpty;
}

// An all-ones word is a NaN (two for 16-bit types): make it another NaN.
__device__ __forceinline__ uint32_t notEmpty(uint32_t w) { return w == kLamportEmpty ? 0x7fffffffu : w; }
__device__ __forceinline__ Pack notEmpty(const Pack& v) {
  return Pack{notEmpty(v.x), notEmpty(v.y), notEmpty(v.z), notEmpty(v.w)};
}

// This thread's pack at element i of `in` (count elements); elements past the end
// read as zero, so every pack a reader polls for gets written.
template <typename T>
__device__ __forceinline__ Pack loadInputPack(const T* in, size_t i, size_t count, bool vec) {
  constexpr int E = PackTraits<T>::kElems;
  Pack v;
  if (vec && i + E <= count) {
    v = *reinterpret_cast<const Pack*>(in + i);
  } else {
    T* e = reinterpret_cast<T*>(&v);
    for (int k = 0; k < E; ++k) e[k] = i + k < count ? in[i + k] : T(0.f);
  }
  return v;
}

// Poll the NR packs p[j] (NR > 0) until all are written, starting from the values
// already loaded in v; on success v holds them. Rank (first + j) % nranks writes
// p[j] (named in the error record). Returns false when the wait gave up.
template <int NR>
__device__ __forceinline__ bool pollPacks(const DeviceComm& dc, Op op, int channel, uint32_t buf,
                                          const Pack* const (&p)[NR], Pack (&v)[NR], int first) {
  bool ready = true;
#pragma unroll
  for (int j = 0; j < NR; ++j) ready = ready && packReady(v[j]);
  if (ready) return true;
  WaitExits exits;
  for (uint32_t spin = 1;; ++spin) {
    // Back off between rounds, after the first dc.lamportSpins (FC_LAMPORT_SPINS):
    // tens of thousands of threads re-polling at full rate compete with the incoming
    // remote writes for the same L2 (measured: docs/perf-log.md; 100 ns measured the
    // same as 30 ns, within 1 %), while a small call's data is due within a round
    // trip, which each back-off can only prolong.
    if (spin > dc.lamportSpins) __nanosleep(100);
    ready = true;
#pragma unroll
    for (int j = 0; j < NR; ++j) {
      if (!packReady(v[j])) v[j] = loadVolatilePack(p[j]);
      ready = ready && packReady(v[j]);
    }
    if (ready) return true;
    if ((spin & 1023u) == 0u) {
      int missing = 0;
#pragma unroll
      for (int j = 0; j < NR; ++j)
        if (!packReady(v[j])) missing = (first + j) % dc.nranks;
      if (exits.giveUp(dc, op, missing, channel, buf, 0, WaitKind::LamportData)) return false;
    }
  }
}

// One pack, for world sizes without a compile-time rank count.
__device__ __forceinline__ bool pollPack(const DeviceComm& dc, Op op, int channel, uint32_t buf,
                                         const Pack* p, Pack& v, int sender) {
  const Pack* const ps[1] = {p};
  Pack vs[1] = {v};
  const bool ok = pollPacks<1>(dc, op, channel, buf, ps, vs, sender);
  v = vs[0];
  return ok;
}

// Pack pk of the slots of every peer (rank+1, rank+2, ... in turn) in one set: where
// they are and what they held at the last look.
template <int NP>
struct PeerPacks {
  const Pack* p[NP];
  Pack v[NP];
};

// Pack 0 of a slot of each peer (LamportRun::pushSlots, ownSlots), and the set and
// buffer they are of: the any-size kernels (NR = 0, PeerSlots<-1>, no pointers) address
// each peer's slot from those instead, so that one call serves both. At least one entry:
// overload resolution names PeerSlots<NR - 1> for NR = 0 too.
template <int NP>
struct PeerSlots {
  Pack* p[NP > 0 ? NP : 1];
  int set;
  uint32_t buf;
};

// Addressing and the per-CTA bookkeeping of a kernel's runs (one per pass) of kind K.
// Every thread of the CTA keeps the same copy of the state in registers; thread 0
// writes it back at the end (save).
template <LamportKind K>
struct LamportRun {
  using Traits = LamportTraits<K>;
  static constexpr int kSets = Traits::kSets;
  static constexpr size_t kChunkPacks = size_t(Traits::kChunkPacks);

  const DeviceComm& dc;       // the waits' error records (pollPacks)
  // Copies of the fields the data loops address with. The kernels pass DeviceComm on by
  // reference; every push or clear is a generic store that may alias it, after which a
  // field read through `dc` is loaded again and the slot address recomputed (a runtime
  // modulo and 64-bit products: ~130 instructions a pack in the one-shot's push loop,
  // measured in its SASS, when it lived in local memory). Held here, they stay in
  // registers and the addresses are loop invariants; used[] is indexed by selects
  // (usedOf) so that this object stays out of local memory too.
  char* base;                 // dc.base
  uint64_t stride;            // dc.stride
  int rank, nranks, maxCtas;  // dc.rank, dc.nranks, dc.maxCtas
  size_t channelOff;          // heap offset of this channel's buffers
  size_t slotBytes;           // lamportSlotBytes(W)
  uint32_t* state;            // this kind's state words of this CTA (Rows: of CTA 0)
  uint32_t buf;               // the buffer the current run uses
  uint32_t used[3 * kSets];   // chunks set t of buffer b last held: used[3 * t + b] (Rows: unused)

  // Unread: the Rows kind without reading its state; the caller sets buf before any push
  // or read (the decode kernels' data warps, which take the index from their call warp:
  // gemv_all_reduce.cu) and does not arrive.
  struct Unread {};
  __device__ LamportRun(const DeviceComm& d, int channel) : LamportRun(d, channel, Unread{}) {
    buf = state[0];
    if constexpr (!Traits::kWholeRank) {
#pragma unroll
      for (int k = 0; k < 3 * kSets; ++k) used[k] = state[1 + k];
    }
  }
  __device__ LamportRun(const DeviceComm& d, int channel, Unread)
      : dc(d),
        base(d.base),
        stride(d.stride),
        rank(d.rank),
        nranks(d.nranks),
        maxCtas(d.maxCtas),
        channelOff(d.lamportOffset + size_t(channel) * lamportChannelBytes(d.nranks)),
        slotBytes(lamportSlotBytes(d.nranks)),
        state(reinterpret_cast<uint32_t*>(d.base + size_t(d.rank) * d.stride + kLamportStateOffset) +
              (size_t(channel) * kMaxBlocks + (Traits::kWholeRank ? 0u : blockIdx.x)) * kLamportStateWords +
              Traits::kStateWord),
        buf(0) {}

  // Slot of rank `sender` in this kind's set `set` of buffer `b` on rank `owner`
  // (sender != owner), as packs: the owner's peer (sender - owner - 1) mod W.
  __device__ Pack* slot(int owner, uint32_t b, int set, int sender) const {
    // (sender - owner - 1) mod W without a division: both ranks are below W.
    const int d = sender - owner - 1;
    const size_t peer = size_t(d < 0 ? d + nranks : d);
    return reinterpret_cast<Pack*>(
        base + size_t(owner) * stride + channelOff +
        ((size_t(b) * kLamportSets + size_t(Traits::kFirstSet + set)) * lamportPeerSlots(nranks) + peer) *
            slotBytes);
  }

  // Pack 0 of every peer's slot in set `set` of buffer b, one pointer a peer (j: rank
  // + 1 + j), for a compile-time world size NR: computed once, before a kernel's loops,
  // which then only index them. pushSlots: ours on each peer (where we push);
  // ownSlots: each peer's on this rank (what we poll and clear).
  template <int NR>
  __device__ PeerSlots<NR - 1> pushSlots(int set, uint32_t b) const {
    PeerSlots<NR - 1> s{{}, set, b};
    if constexpr (NR > 0) {  // NR = 0 (any world size): none
#pragma unroll
      for (int j = 0; j < NR - 1; ++j) s.p[j] = slot((rank + 1 + j) % NR, b, set, rank);
    }
    return s;
  }
  template <int NR>
  __device__ PeerSlots<NR - 1> ownSlots(int set, uint32_t b) const {
    PeerSlots<NR - 1> s{{}, set, b};
    if constexpr (NR > 0) {  // NR = 0 (any world size): none
#pragma unroll
      for (int j = 0; j < NR - 1; ++j) s.p[j] = slot(rank, b, set, (rank + 1 + j) % NR);
    }
    return s;
  }

  // The pack index (in a slot) of this CTA's k-th owned pack: chunk
  // blockIdx.x + (k / kChunkPacks) * maxCtas, pack k % kChunkPacks. It grows with k,
  // so walks (by the data threads) stop at the first index past the end:
  //   for (size_t k = threadIdx.x;; k += lamportDataThreads()) {
  //     const size_t pk = run.ownedPack(k); if (pk >= packs) break; ... }
  __device__ size_t ownedPack(size_t k) const {
    const size_t c = blockIdx.x + (k / kChunkPacks) * size_t(maxCtas);
    return c * kChunkPacks + k % kChunkPacks;
  }
  // The same in 32-bit arithmetic, for walks over one slot (at most
  // kLamportSlotBytesMax / 16 packs, far below 2^32).
  __device__ uint32_t ownedPack32(uint32_t k) const {
    const uint32_t c = blockIdx.x + (k / uint32_t(kChunkPacks)) * uint32_t(maxCtas);
    return c * uint32_t(kChunkPacks) + k % uint32_t(kChunkPacks);
  }

  // First look at pack pk of every peer's slot in `from` (ownSlots: NR is the world
  // size); the loads all go out before any is used.
  template <int NR>
  __device__ void lookAtPeers(const PeerSlots<NR - 1>& from, size_t pk, PeerPacks<NR - 1>& peers) const {
#pragma unroll
    for (int j = 0; j < NR - 1; ++j) {
      peers.p[j] = from.p[j] + pk;
      peers.v[j] = loadVolatilePack(peers.p[j]);
    }
  }
  // The same in our set `set` of the current buffer.
  template <int NR>
  __device__ void lookAtPeers(int set, size_t pk, PeerPacks<NR - 1>& peers) const {
    lookAtPeers<NR>(ownSlots<NR>(set, buf), pk, peers);
  }

  // Wait until every pack of `peers` is written (false: gave up, error recorded).
  template <int NP>
  __device__ bool waitForPeers(Op op, int channel, PeerPacks<NP>& peers) const {
    return pollPacks<NP>(dc, op, channel, buf, peers.p, peers.v, rank + 1);
  }

  // acc = the fp32 sum, in rank order (the same bits on every rank), of pack pk of
  // every rank: `own` is this rank's, the peers' are polled for in `from` (ownSlots of
  // a set of this rank's current buffer). NR: the world size at compile time (0: any;
  // one peer at a time). False when a wait gave up (the error is recorded).
  template <typename T, int NR>
  __device__ bool sumInRankOrder(Op op, int channel, const PeerSlots<NR - 1>& from, size_t pk, const Pack& own,
                                 float (&acc)[PackTraits<T>::kElems]) const {
#pragma unroll
    for (int e = 0; e < PackTraits<T>::kElems; ++e) acc[e] = 0.f;
    if constexpr (NR > 0) {
      // All peers' loads in flight at once; re-poll only the packs still missing.
      PeerPacks<NR - 1> peers;
      lookAtPeers<NR>(from, pk, peers);
      if (!waitForPeers(op, channel, peers)) return false;
      Pack all[NR];  // all[j]: rank (rank + j) % NR's pack
      all[0] = own;
#pragma unroll
      for (int j = 0; j < NR - 1; ++j) all[j + 1] = peers.v[j];
      accumulateInRankOrder<T, NR>(acc, all, rank);
    } else {
      for (int s = 0; s < nranks; ++s) {
        if (s == rank) {
          accumulate<T>(acc, own);
          continue;
        }
        const Pack* p = slot(rank, from.buf, from.set, s) + pk;
        Pack v = loadVolatilePack(p);
        if (!pollPack(dc, op, channel, from.buf, p, v, s)) return false;
        accumulate<T>(acc, v);
      }
    }
    return true;
  }

  // The same, the peers' packs polled for in set `set` of this rank's current buffer.
  template <typename T, int NR>
  __device__ bool sumInRankOrder(Op op, int channel, int set, size_t pk, const Pack& own,
                                 float (&acc)[PackTraits<T>::kElems]) const {
    return sumInRankOrder<T, NR>(op, channel, ownSlots<NR>(set, buf), pk, own, acc);
  }

  // used[3 * set + b] for a buffer b known only at run time, by selects over the three:
  // an index unknown at compile time would put the array, and with it this object,
  // in local memory (a stack frame every thread of every call writes and reads).
  __device__ uint32_t usedOf(int set, uint32_t b) const {
    return b == 0 ? used[3 * set] : b == 1 ? used[3 * set + 1] : used[3 * set + 2];
  }

  // Reset what the previous run (buffer (buf + 2) % 3) wrote into this rank's
  // buffers: this CTA's chunks of every peer's slot, as many as that run used. The
  // data threads call it (first: threadIdx.x, stride: their count), or the call warp
  // (its lane, 32). Buffer (buf + 2) % 3 was fully read in that run, and no peer
  // writes it again before our next run has started (see the protocol in design.md).
  // NR: the world size at compile time (0: any).
  template <int NR = 0>
  __device__ void resetStale() const {
    resetStale<NR>(threadIdx.x, lamportDataThreads());
  }
  template <int NR = 0>
  __device__ void resetStale(unsigned first, unsigned stride) const {
    static_assert(!Traits::kWholeRank, "Rows clears what it reads instead (clearRead)");
    const Pack empty{kLamportEmpty, kLamportEmpty, kLamportEmpty, kLamportEmpty};
    const uint32_t stale = (buf + 2) % 3;
#pragma unroll
    for (int set = 0; set < kSets; ++set) {
      const size_t packs = size_t(usedOf(set, stale)) * kChunkPacks;
      if constexpr (NR > 0) {
        const PeerSlots<NR - 1> from = ownSlots<NR>(set, stale);
        for (size_t k = first;; k += stride) {
          const size_t pk = ownedPack(k);
          if (pk >= packs) break;
#pragma unroll
          for (int j = 0; j < NR - 1; ++j) from.p[j][pk] = empty;
        }
      } else {
        for (size_t k = first;; k += stride) {
          const size_t pk = ownedPack(k);
          if (pk >= packs) break;
          for (int s = 0; s < nranks; ++s)
            if (s != rank) slot(rank, stale, set, s)[pk] = empty;
        }
      }
    }
  }

  // Rows: clear pack pk of every peer's slot in `from` (ownSlots of set 0 of the current
  // buffer; NP: the world size - 1 at compile time, -1: any), which this thread has just
  // read (sumInRankOrder). Safe without a fence: the peer writes this
  // buffer again three calls later, which needs our pushes of the call after this
  // one, which start after this kernel (and its stores) completed (stream order; with
  // PDL, griddepcontrol.wait waits for the whole previous grid and its memory). The
  // one-shot kind resets the stale buffer instead (resetStale), but for the measurement
  // form FC_LAMPORT_STAGES=clear-read (device_comm.h), where the same argument holds per
  // CTA: a peer is at most one run ahead.
  template <int NP>
  __device__ void clearRead(const PeerSlots<NP>& from, size_t pk) const {
    static_assert(K != LamportKind::TwoShot, "the two-shot kind resets the stale buffer");
    const Pack empty{kLamportEmpty, kLamportEmpty, kLamportEmpty, kLamportEmpty};
    if constexpr (NP >= 0) {
#pragma unroll
      for (int j = 0; j < NP; ++j) from.p[j][pk] = empty;
    } else {
      for (int s = 0; s < nranks; ++s)
        if (s != rank) slot(rank, from.buf, from.set, s)[pk] = empty;
    }
  }
  // The same in set 0 of the current buffer.
  __device__ void clearRead(size_t pk) const { clearRead(ownSlots<0>(0, buf), pk); }

  // Rows, FC_ARNORM_GATHER_SET: the two-shot norm's all-gather slot of rank `sender` on
  // rank `owner` in buffer b of this channel (device_comm.h, lamportGatherBytes); the same
  // buffers, in the same turn, as the Rows set's.
  __device__ Pack* gatherSlot(int channel, int owner, uint32_t b, int sender) const {
    static_assert(Traits::kWholeRank, "the gather sets are the Rows kind's");
    const int d = sender - owner - 1;
    const size_t peer = size_t(d < 0 ? d + nranks : d);
    return reinterpret_cast<Pack*>(base + size_t(owner) * stride + dc.rowsGatherOffset +
                                   size_t(channel) * lamportGatherBytes(nranks) +
                                   (size_t(b) * lamportPeerSlots(nranks) + peer) * slotBytes);
  }

  // Rows: this CTA has read the buffer index (every thread, before a __syncthreads
  // that comes before this call, or only the arriving thread, which hands it on:
  // gemv_all_reduce.cu; one thread per CTA arrives). The CTA that arrives
  // last - every CTA of the grid has then read the index - moves the index on and
  // zeroes the counter for the next call, which reads both only after this grid has
  // completed. Split in two so that the atomic's round trip overlaps other work:
  // arrive() issues it, nothing waits for its result until advanceIfLast(). acq_rel at
  // gpu scope: the CTA's reads of the index (ordered before this thread's atomic by
  // the barrier, or by its program order) happen before the last CTA's stores.
  __device__ uint32_t arrive() const {
    static_assert(Traits::kWholeRank, "only the whole-rank kind shares one state");
    uint32_t before;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;"
                 : "=r"(before)
                 : "l"(state + kRowsCounterWord)
                 : "memory");
    return before;
  }
  // runs: the buffers this kernel used in turn from buf (the Rows two-shot's passes).
  __device__ void advanceIfLast(uint32_t before, uint32_t runs = 1) const {
    if (before == gridDim.x - 1) {
      state[0] = (buf + runs) % 3;
      state[kRowsCounterWord] = 0;
    }
  }

  // Record the chunks this run used in each set and move to the next buffer. Every
  // thread calls it (the copies stay equal).
  __device__ void advance(const uint32_t (&chunks)[kSets]) {
#pragma unroll
    for (int set = 0; set < kSets; ++set)
#pragma unroll
      for (int b = 0; b < 3; ++b)
        if (uint32_t(b) == buf) used[3 * set + b] = chunks[set];
    buf = (buf + 1) % 3;
  }

  // A kernel of one run (the one-shot): write the state the next kernel starts from -
  // the next buffer, and `chunks` as what this run's buffer holds - as soon as every
  // thread of the CTA has read it (one thread, after a barrier), so that the stores are
  // not left for the end of the kernel, whose completion would wait for them. The next
  // kernel reads the state after griddepcontrol.wait, i.e. after this grid completed;
  // a run that gives up has recorded an error, after which the communicator only
  // reports it (it must be destroyed), so the state need not stay behind.
  __device__ void saveNext(uint32_t chunks) const {
    static_assert(kSets == 1 && !Traits::kWholeRank, "one set, per-CTA state");
    state[1 + buf] = chunks;
    state[0] = (buf + 1) % 3;
  }

  // Write the state back for the next kernel: thread 0, after the last advance.
  __device__ void save() const {
    state[0] = buf;
#pragma unroll
    for (int k = 0; k < 3 * kSets; ++k) state[1 + k] = used[k];
  }
};

// Call headers: mismatched calls on the barrier-free path.
//
// The Lamport kernels exchange no flags, so nothing else would notice ranks calling
// with different counts, dtypes or kinds (one-shot / two-shot) at the same point:
// they would add whatever lies in the push buffers, or wait for packs that never
// come. So the call warp of CTA b pushes a header - the op signature and the whole
// count - to CTA b of every peer, checks the header every peer's CTA b pushed to
// it, and records a Mismatch naming both calls when they differ. The data threads
// never wait for it: a mismatch that leaves them waiting for data ends their wait
// through the error guard it sets (WaitExits), within ~0.1 ms. CTA 0 runs in every
// call, so every mismatch between two ranks is seen by both.
//
// The headers are their own instance of the protocol, shared by both kinds: three
// buffers used in turn by a CTA's calls (state word kCallStateWord), the one before
// the previous call's reset by the call warp, the three-buffer argument of the data
// unchanged (every call of a CTA pushes to and waits for every peer's CTA).
struct LamportCall {
  const DeviceComm& dc;
  size_t headerOff;   // heap offset of this channel's headers
  uint32_t* state;    // this CTA's header buffer index
  uint32_t buf;       // its value (the call warp's copy; the data threads do not read it)
  Pack mine;

  __device__ LamportCall(const DeviceComm& d, int channel, uint32_t sig, uint64_t count)
      : dc(d),
        headerOff(d.lamportOffset + size_t(channel) * lamportChannelBytes(d.nranks) + lamportPushBytes(d.nranks)),
        state(reinterpret_cast<uint32_t*>(d.base + size_t(d.rank) * d.stride + kLamportStateOffset) +
              (size_t(channel) * kMaxBlocks + blockIdx.x) * kLamportStateWords + kCallStateWord),
        // (A Rows kernel's grid may pass kMaxBlocks CTAs - FC_ARNORM_ROW_CTAS - whose
        // call warps only arrive: only CTAs below it have header words, and run().)
        buf(isCallWarp() && blockIdx.x < unsigned(kMaxBlocks) ? *state : 0u),
        // No word of a header is ever all ones (the op is in the signature's top 4 bits).
        mine{sig, uint32_t(count) & 0x7fffffffu, uint32_t(count >> 31) & 0x7fffffffu, 0x4c414d50u} {}

  __device__ bool isCallWarp() const { return threadIdx.x >= lamportDataThreads(); }

  // Header sent by `sender` to CTA blockIdx.x of `owner`, in buffer b.
  __device__ Pack* slot(int owner, uint32_t b, int sender) const {
    return reinterpret_cast<Pack*>(dc.base + size_t(owner) * dc.stride + headerOff) +
           (size_t(b) * kMaxBlocks + blockIdx.x) * size_t(dc.nranks) + size_t(sender);
  }

  // The call warp's whole part: lane j < W-1 deals with peer rank+1+j. Move the buffer
  // index on at once (lane 0, once the warp has read it: only this warp uses it, and
  // the next kernel reads it after this grid completed); push our header,
  // reset the one that peer sent in our call before last, wait for its header of this
  // call and compare. Returns false when the wait gave up or the calls differ (the
  // error is recorded).
  __device__ bool run(Op op, int channel) {
    const int lane = int(threadIdx.x - lamportDataThreads());
    __syncwarp();
    if (lane == 0) *state = (buf + 1) % 3;
    bool ok = true;
    if (lane < dc.nranks - 1) {
      const int peer = (dc.rank + 1 + lane) % dc.nranks;
      *slot(peer, buf, dc.rank) = mine;
      *slot(dc.rank, (buf + 2) % 3, peer) = Pack{kLamportEmpty, kLamportEmpty, kLamportEmpty, kLamportEmpty};
      const Pack* p = slot(dc.rank, buf, peer);
      Pack theirs = loadVolatilePack(p);
      ok = pollPack(dc, op, channel, buf, p, theirs, peer);
      if (ok && (theirs.x != mine.x || theirs.y != mine.y || theirs.z != mine.z)) {
        // (or a peer's earlier give-up, recorded as a wait for this push buffer)
        recordMismatch(dc, op, peer, channel, mine.x, theirs.x, buf, buf, WaitKind::LamportData);
        ok = false;
      }
    }
    return ok;
  }
};

}  // namespace fc::dev
