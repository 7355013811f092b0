// Device-side synchronisation between ranks through signal pads.
//
// Protocol. For channel c and CTA b, every rank owns a row of flags
// flags[c][b][s], one 64-bit word per sender rank s: only rank s ever writes that
// word (one writer per word, no read-modify-write across the fabric). A rank keeps
// a private, device-resident epoch per (c, b) that grows by one per barrier. To
// meet its peers at epoch e, CTA b of rank r stores {e, sig} into flags[c][b][r] of
// every peer (one 64-bit release store) and waits until its own flags[c][b][p]
// carries an epoch >= e for every peer p.
//
// sig names the operation (op, dtype, count mod 2^24). When a peer's flag shows
// exactly epoch e, its sig must equal ours, or the ranks are running different
// collectives at the same point: both would otherwise pass and silently exchange
// the wrong data. If the peer already shows e+1 it has seen our {e, sig} and made
// the same check itself, so every pair of ranks is checked by at least one side.
//
// Why this is reusable without resets and safe under CUDA-graph replay: epochs
// live in device memory and only grow, so a replayed launch continues the sequence;
// nothing on the host is baked into the launch. Why ">=" and not "==": a fast peer
// may already have moved on to the next barrier (e+1) before we read its flag; it
// cannot get further, because barrier e+1 also needs our signal. Comparisons are
// wrap-safe (signed difference), so 2^31 barriers may pass between two looks.
#pragma once

#include <cstdint>

#include "device/device_comm.h"

namespace fc::dev {

// Store `v` with release semantics at system scope: every memory access this
// thread made before - and, by cumulativity, every access of its CTA ordered
// before it by a __syncthreads - is visible to any thread (on any GPU) that
// observes `v` with an acquire load.
__device__ __forceinline__ void storeReleaseSys(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Acquire load at system scope: pairs with storeReleaseSys.
__device__ __forceinline__ uint64_t loadAcquireSys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint32_t loadVolatile(const uint32_t* p) {
  return *reinterpret_cast<const volatile uint32_t*>(p);
}

__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t* flagAddr(const DeviceComm& dc, int owner, int channel,
                                              int block, int sender) {
  return reinterpret_cast<uint64_t*>(dc.base + size_t(owner) * dc.stride) +
         (size_t(channel) * kMaxBlocks + block) * kMaxRanks + sender;
}

__device__ __forceinline__ uint32_t* epochAddr(const DeviceComm& dc, int channel, int block) {
  return reinterpret_cast<uint32_t*>(dc.base + size_t(dc.rank) * dc.stride + kFlagBytes) +
         size_t(channel) * kMaxBlocks + block;
}

__device__ __forceinline__ uint32_t* errorGuard(const DeviceComm& dc) {
  return reinterpret_cast<uint32_t*>(dc.base + size_t(dc.rank) * dc.stride + kGuardOffset);
}

__device__ __forceinline__ uint32_t* peerAbortWord(const DeviceComm& dc, int owner) {
  return reinterpret_cast<uint32_t*>(dc.base + size_t(owner) * dc.stride + kPeerAbortOffset);
}

__device__ __forceinline__ unsigned long long* hostPollWord(const DeviceComm& dc) {
  return reinterpret_cast<unsigned long long*>(dc.base + size_t(dc.rank) * dc.stride + kHostPollOffset);
}

// Record why this thread gives up; the first writer wins, later ones keep quiet.
__device__ inline void recordError(const DeviceComm& dc, Op op, GiveUp reason, int peer,
                                   int channel, uint32_t expected, uint32_t seen,
                                   WaitKind kind = WaitKind::Epoch) {
  if (atomicCAS(errorGuard(dc), 0u, 1u) != 0u) return;
  volatile ErrorRecord* e = dc.error;
  e->op = uint32_t(op);
  e->reason = uint32_t(reason);
  e->rank = dc.rank;
  e->peer = peer;
  e->block = int(blockIdx.x);
  e->channel = channel;
  e->expected = expected;
  e->seen = seen;
  e->waitKind = uint32_t(kind);
  __threadfence_system();  // the fields reach host memory before the state that publishes them
  e->state = 2u;
  // Tell the peers' kernels, so that they fail now rather than at their own
  // deadline (a peer that aborted already told us; no echo back).
  if (reason != GiveUp::PeerAbort)
    for (int r = 0; r < dc.nranks; ++r)
      if (r != dc.rank) *reinterpret_cast<volatile uint32_t*>(peerAbortWord(dc, r)) = uint32_t(dc.rank) + 1u;
}

// Two ranks' op signatures differ at the same point: record a Mismatch naming both,
// unless a peer has given up before. A rank that gave up runs on through the rest of
// its ops without waiting (its kernels end on whatever their buffers hold), so its
// flags and headers soon show a later op at our point: that is its give-up, not a
// mismatch of the calls. Its recordError stored the word we read here before any of
// those later flags (stream order, and their release stores; we read after acquiring).
// expected, seen, kind: what the wait was for, recorded with the give-up.
__device__ inline void recordMismatch(const DeviceComm& dc, Op op, int peer, int channel, uint32_t mine,
                                      uint32_t theirs, uint32_t expected, uint32_t seen, WaitKind kind) {
  if (const uint32_t aborter = loadVolatile(peerAbortWord(dc, dc.rank)); aborter != 0u)
    recordError(dc, op, GiveUp::PeerAbort, int(aborter) - 1, channel, expected, seen, kind);
  else
    recordError(dc, op, GiveUp::Mismatch, peer, channel, mine, theirs);
}

// waitFlag: wait until *flag carries an epoch >= expected (wrap-safe) and, at exactly
// `expected`, our signature; or until WaitExits says to give up. Returns true on
// success. The hot loop is one acquire load of local memory; the host abort flag is
// read rarely because hundreds of CTAs polling host memory over PCIe slow each other
// down (measured: 1-2 MiB all-reduces went from ~20 us to ~200 us).
// The exits of every device wait, checked every 1024 polls: another CTA of this rank
// already gave up (local guard), a peer gave up or aborted (local word), the host
// aborted (host memory: read by one thread of the rank at most once per 100 us), or
// the deadline passed. Returns true when the caller must give up (the error is
// recorded).
//
// One thread per rank, not one per waiting thread, reads the host's flag: a Lamport
// wait has every thread of up to 128 CTAs polling, and once such a wait outlasted
// 100 us each of those ~70,000 threads read host memory at the same moment. That
// burst of PCIe reads took about 1 ms, long enough to make the peer's next wait
// outlast 100 us in turn, so the two ranks kept each other at ~1 ms per call
// (measured on 2 H100s, 2026-11-25: graph replays of 1 MiB all-reduces and 2-4 MiB
// reduce-scatters at 1.1-1.5 ms per call instead of 6-13 us, until the replays
// were started together by a barrier; docs/perf-log.md). Whose turn it is comes
// from a compare-and-swap on a word of this rank's device memory (hostPollWord);
// the thread that finds the abort records it, and every other waiter of the rank
// sees the error guard at its next check.
struct WaitExits {
  static constexpr uint64_t kAbortPollNs = 100000;
  uint64_t start;
  uint64_t lastAbortPoll;

  __device__ WaitExits() : start(globalTimerNs()), lastAbortPoll(start) {}

  // Whether this thread reads the host's abort flag now: at most one thread of the
  // rank per kAbortPollNs. A stored time ahead of ours (another thread's newer one,
  // or an uninitialised word) counts as old: at worst one extra read.
  __device__ static bool hostPollTurn(const DeviceComm& dc, uint64_t now) {
    unsigned long long* word = hostPollWord(dc);
    const unsigned long long seen = *reinterpret_cast<volatile unsigned long long*>(word);
    if (now - seen < kAbortPollNs) return false;
    return atomicCAS(word, seen, static_cast<unsigned long long>(now)) == seen;
  }

  // kind: what the caller polls (WaitKind; LamportData: `expected` is the push buffer).
  __device__ bool giveUp(const DeviceComm& dc, Op op, int peer, int channel, uint32_t expected,
                         uint32_t seen, WaitKind kind = WaitKind::Epoch) {
    const uint64_t now = globalTimerNs();
    if (loadVolatile(errorGuard(dc)) != 0u) return true;
    if (const uint32_t aborter = loadVolatile(peerAbortWord(dc, dc.rank)); aborter != 0u) {
      recordError(dc, op, GiveUp::PeerAbort, int(aborter) - 1, channel, expected, seen, kind);
      return true;
    }
    if (now - lastAbortPoll > kAbortPollNs) {
      lastAbortPoll = now;
      if (hostPollTurn(dc, now) && loadVolatile(&dc.error->abortFlag) != 0u) {
        recordError(dc, op, GiveUp::Abort, peer, channel, expected, seen, kind);
        return true;
      }
    }
    if (now - start > dc.timeoutNs) {
      recordError(dc, op, GiveUp::Timeout, peer, channel, expected, seen, kind);
      return true;
    }
    return false;
  }
};

__device__ inline bool waitFlag(const DeviceComm& dc, Op op, const uint64_t* flag,
                                uint32_t expected, uint32_t sig, int peer, int channel) {
  WaitExits exits;
  for (uint32_t spin = 1;; ++spin) {
    const uint64_t word = loadAcquireSys(flag);
    const uint32_t seen = uint32_t(word);
    if (int32_t(seen - expected) >= 0) {
      if (seen == expected && uint32_t(word >> 32) != sig) {
        recordMismatch(dc, op, peer, channel, sig, uint32_t(word >> 32), expected, seen, WaitKind::Epoch);
        return false;
      }
      return true;
    }
    if ((spin & 1023u) == 0u && exits.giveUp(dc, op, peer, channel, expected, seen)) return false;
  }
}

// Wait (one thread) until the 32-bit word written by another agent - a copy engine's
// stream write, a peer's release add - reaches at least `target`; acquire at system
// scope, polls backed off. Gives up through WaitExits (the error is recorded with
// `peer`, `kind`, target and the last value seen) and returns false; returns false at
// once when this rank has already given up (its error guard is set), so that later
// waits of a failed op do not each wait out the deadline.
__device__ inline bool waitAtLeast(const DeviceComm& dc, Op op, const uint32_t* word, uint32_t target, int peer,
                                   int channel, WaitKind kind) {
  if (loadVolatile(errorGuard(dc)) != 0u) return false;
  WaitExits exits;
  for (uint32_t spin = 1;; ++spin) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(word) : "memory");
    if (v >= target) return true;
    __nanosleep(64);
    if ((spin & 1023u) == 0u && exits.giveUp(dc, op, peer, channel, target, v, kind)) return false;
  }
}

// Barrier of CTA blockIdx.x of every rank on `channel` at `epoch`. All threads of
// the CTA must call it. Returns false (on every thread) if it gave up.
//
// Ordering: the leading __syncthreads makes all of this CTA's prior writes (e.g.
// the workspace it filled) happen-before thread p's release store, which is
// cumulative at system scope. Thread p's acquire load, followed by the trailing
// barrier, makes every peer's pre-signal writes visible to all threads of the CTA.
__device__ inline bool barrierBlock(const DeviceComm& dc, Op op, uint32_t sig, int channel,
                                    uint32_t epoch) {
  __syncthreads();
  int failed = 0;
  const int p = int(threadIdx.x);
  if (p < dc.nranks) {
    storeReleaseSys(flagAddr(dc, p, channel, int(blockIdx.x), dc.rank), (uint64_t(sig) << 32) | epoch);
    failed = !waitFlag(dc, op, flagAddr(dc, dc.rank, channel, int(blockIdx.x), p), epoch, sig, p,
                       channel);
  }
  return __syncthreads_or(failed) == 0;
}

}  // namespace fc::dev
