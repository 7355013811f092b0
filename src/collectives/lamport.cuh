// The Lamport protocol's building blocks, shared by the Lamport one-shot and
// two-shot all-reduces: push buffers whose data is its own flag.
//
// Buffers. Per channel there are three buffers (used in turn by a CTA's runs), each
// of two sets (set 0: what the one-shot pushes and the two-shot's reduce-scatter
// pushes; set 1: the two-shot's all-gather pushes), each of one kLamportSlotBytes
// slot per sender rank. A word still holding kLamportEmpty has not been written:
// writers never write that word (notEmpty), readers poll until no word of a pack
// holds it, and a run resets what the run before it consumed.
//
// Per-CTA state (device memory, private to the rank): {buffer index, then for each
// buffer the chunks its set 0 and set 1 used}. A set-0 count carries kOwnSlotUsed
// when the run also wrote its own slot (the one-shot does, the two-shot does not),
// so that the reset touches exactly what was written.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/chunks.cuh"
#include "device/device_comm.h"
#include "device/sync.cuh"

namespace fc::dev {

constexpr uint32_t kOwnSlotUsed = 0x80000000u;

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

// Addressing and the per-CTA bookkeeping of a kernel's runs (one per pass). Every
// thread of the CTA keeps the same copy of the state in registers; thread 0 writes
// it back at the end (save).
struct LamportRun {
  static constexpr int kStateWords = 8;  // {buffer, set-0 chunks[3], set-1 chunks[3], pad}

  const DeviceComm& dc;
  size_t channelOff;  // heap offset of this channel's buffers
  uint32_t* state;    // this CTA's state words
  uint32_t buf;       // the buffer the current run uses
  uint32_t used[6];   // chunks each buffer's set 0 (0..2) and set 1 (3..5) last held

  __device__ LamportRun(const DeviceComm& d, int channel)
      : dc(d),
        channelOff(d.lamportOffset + size_t(channel) * lamportChannelBytes(d.nranks)),
        state(reinterpret_cast<uint32_t*>(d.base + size_t(d.rank) * d.stride + kLamportStateOffset) +
              (size_t(channel) * kMaxBlocks + blockIdx.x) * kStateWords),
        buf(state[0]) {
#pragma unroll
    for (int k = 0; k < 6; ++k) used[k] = state[1 + k];
  }

  // Slot `sender` of set `set` of buffer `b` on rank `owner`.
  __device__ char* slot(int owner, uint32_t b, int set, int sender) const {
    return dc.base + size_t(owner) * dc.stride + channelOff +
           ((size_t(b) * 2 + size_t(set)) * size_t(dc.nranks) + size_t(sender)) * kLamportSlotBytes;
  }

  // Reset what the previous run (buffer (buf + 2) % 3) wrote into this rank's
  // buffers: this CTA's chunks (c = blockIdx.x mod maxCtas) of every slot it used.
  // Buffer (buf + 2) % 3 was fully read in that run, and no peer writes it again
  // before our next run has started (see the protocol in design.md).
  __device__ void resetStale() const {
    const Pack empty{kLamportEmpty, kLamportEmpty, kLamportEmpty, kLamportEmpty};
    const uint32_t stale = (buf + 2) % 3;
    const size_t ctas = size_t(dc.maxCtas);
    const size_t off = size_t(threadIdx.x) * kPackBytes;
    for (int set = 0; set < 2; ++set) {
      const uint32_t u = used[3 * set + stale];
      const size_t chunks = u & ~kOwnSlotUsed;
      for (size_t c = blockIdx.x; c < chunks; c += ctas)
        for (int s = 0; s < dc.nranks; ++s)
          if (s != dc.rank || (u & kOwnSlotUsed))
            *reinterpret_cast<Pack*>(slot(dc.rank, stale, set, s) + c * kChunkBytes + off) = empty;
    }
  }

  // Record what this run used (set0 may carry kOwnSlotUsed) and move to the next
  // buffer. Every thread calls it (the copies stay equal).
  __device__ void advance(uint32_t set0Chunks, uint32_t set1Chunks) {
    used[buf] = set0Chunks;
    used[3 + buf] = set1Chunks;
    buf = (buf + 1) % 3;
  }

  // Write the state back for the next kernel: thread 0, after the last advance.
  __device__ void save() const {
    state[0] = buf;
#pragma unroll
    for (int k = 0; k < 6; ++k) state[1 + k] = used[k];
  }
};
static_assert(size_t(kMaxChannels) * kMaxBlocks * LamportRun::kStateWords * sizeof(uint32_t) <=
                  kLamportStateBytes,
              "Lamport state does not fit");

// Poll the NR packs p[j] (NR > 0) until all are written, starting from the values
// already loaded in v; on success v holds them. `senderOf(j)` names the rank that
// writes p[j] (for the error record). Returns false when the wait gave up.
template <int NR, typename SenderOf>
__device__ __forceinline__ bool pollPacks(const DeviceComm& dc, Op op, int channel, uint32_t buf,
                                          const Pack* const (&p)[NR], Pack (&v)[NR], SenderOf senderOf) {
  bool ready = true;
#pragma unroll
  for (int j = 0; j < NR; ++j) ready = ready && packReady(v[j]);
  if (ready) return true;
  WaitExits exits;
  for (uint32_t spin = 1;; ++spin) {
    // Back off between rounds: tens of thousands of threads re-polling at full rate
    // compete with the incoming remote writes for the same L2.
    __nanosleep(100);
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
        if (!packReady(v[j])) missing = senderOf(j);
      if (exits.giveUp(dc, op, missing, channel, buf, 0, true)) return false;
    }
  }
}

// One pack, for world sizes without a compile-time rank count.
__device__ __forceinline__ bool pollPack(const DeviceComm& dc, Op op, int channel, uint32_t buf,
                                         const Pack* p, Pack& v, int sender) {
  const Pack* const ps[1] = {p};
  Pack vs[1] = {v};
  const bool ok = pollPacks<1>(dc, op, channel, buf, ps, vs, [&](int) { return sender; });
  v = vs[0];
  return ok;
}

}  // namespace fc::dev
