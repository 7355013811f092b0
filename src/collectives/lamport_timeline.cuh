// Where a Lamport one-shot call's time goes inside the kernel, per CTA
// (FC_LAMPORT_STAGES=timeline, a measurement form; device_comm.h, kLamportTimeline), and
// the same for the all-reduce + RMSNorm's one kernel (FC_ARNORM_STAGES=timeline;
// device/norm_stages.h, kNormTimeline), whose second stamp is its first row's end.
//
// The stage variants of fc-bench stages time whole calls with a stage left out or run
// twice; they cannot say when, within a call, a CTA's last pack arrives, nor how far
// apart the CTAs start and end. This form runs the production kernel and stamps, per
// data thread (clock64, cycles since the thread passed griddepcontrol.wait): its pushes
// issued, its reset issued, its first pack summed, its last pack stored. Each CTA keeps
// the latest of each (and the earliest first pack) in shared memory; its last data
// thread adds them to device-wide sums and maxima, with the CTA's start and end on the
// global timer (ns, comparable across SMs). The stamps are taken per warp: the lanes that
// reach a stamp together reduce it within the warp (__reduce_max_sync / min over 32-bit
// cycle counts), and one of them updates the CTA's record, one shared-memory atomic a
// warp instead of one a thread. That was not what made the form slow: with per-warp
// stamps, in a kernel instantiation of its own, the norm's timeline form still takes
// 2.5-3.5 us a call more than the production kernel at world size 1 (one H200, 1-300 rows;
// perf-log, fifty-second session), so the cost lies elsewhere, most likely at the end of
// each CTA (the fences, the device-wide atomics, the last CTA's read-back and printf),
// which the stamps' spans do not include (not measured apart): read the spans within a
// call, not the call's time. The grid's last CTA prints the means over
// CTAs and the maxima every kTimelineEvery calls, a line starting "# timeline" (fc-bench
// keeps such lines out of its CSV) and naming the kernel and its second stamp, and starts
// the sums afresh.
//
// The device-wide words are reset by the grid's last CTA; the next call reads them only
// after griddepcontrol.wait, i.e. after this grid completed (stream order, or PDL's
// wait for the whole previous grid and its memory).
#pragma once

#include <cstdint>
#include <cstdio>

namespace fc {
namespace dev {

constexpr unsigned kTimelineEvery = 64;  // calls between two printed lines

// Per CTA, in shared memory.
struct TimelineCta {
  unsigned long long push, reset, firstMin, firstMax, last;  // cycles since the wait
  unsigned long long startNs;                                 // global timer at the wait
  unsigned done;                                              // data threads done
};

// Device-wide sums (over CTAs) and maxima, the start / end spread, the call count.
enum TimelineWord : int {
  kTlCtas,
  kTlPushSum, kTlPushMax,
  kTlResetSum, kTlResetMax,
  kTlFirstSum, kTlFirstMax,
  kTlLastSum, kTlLastMax,
  kTlStartMin, kTlStartMax, kTlEndMin, kTlEndMax,
  kTlCalls,
  kTlWords
};

// Each kernel's module (allreduce_lamport.cu, allreduce_norm.cu; no relocatable device
// code) has its own words.
__device__ unsigned long long gTimeline[kTlWords] = {0, 0, 0, 0, 0, 0, 0, 0, 0, ~0ull, 0, ~0ull, 0, 0};

__device__ __forceinline__ unsigned long long globalNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ TimelineCta& timelineCta() {
  __shared__ TimelineCta t;
  return t;
}

// One data thread's stamps. begin() right after griddepcontrol.wait, before the CTA's
// first barrier (thread 0 clears the CTA's record there).
struct Timeline {
  unsigned long long t0 = 0;
  bool first = true;

  __device__ void begin() {
    t0 = clock64();
    if (threadIdx.x == 0) {
      TimelineCta& c = timelineCta();
      c.push = c.reset = c.firstMax = c.last = 0;
      c.firstMin = ~0ull;
      c.startNs = globalNs();
      c.done = 0;
    }
  }
  // Cycles since begin(), in 32 bits (a call is far below 2^32 cycles).
  __device__ unsigned since() const {
    const unsigned long long t = clock64() - t0;
    return t < 0xffffffffull ? unsigned(t) : 0xffffffffu;
  }
  // Whether this lane is the lowest of `lanes` (the lanes here together).
  __device__ static bool leads(unsigned lanes) { return (threadIdx.x & 31u) == unsigned(__ffs(lanes) - 1); }
  __device__ static void stampMax(unsigned long long* word, unsigned t) {
    const unsigned lanes = __activemask(), m = __reduce_max_sync(lanes, t);
    if (leads(lanes)) atomicMax(word, (unsigned long long)m);
  }
  __device__ void pushed() { stampMax(&timelineCta().push, since()); }
  __device__ void reset() { stampMax(&timelineCta().reset, since()); }
  __device__ void summed() {
    if (!first) return;
    first = false;
    const unsigned t = since(), lanes = __activemask();
    const unsigned lo = __reduce_min_sync(lanes, t), hi = __reduce_max_sync(lanes, t);
    if (!leads(lanes)) return;
    atomicMin(&timelineCta().firstMin, (unsigned long long)lo);
    atomicMax(&timelineCta().firstMax, (unsigned long long)hi);
  }
  // The end of this data thread's sums; the CTA's last data thread (of `threads`)
  // publishes the CTA's record, the grid's last CTA prints and restarts the sums. kernel
  // and second: the line's names for the kernel and for the stamp reset() takes.
  __device__ void end(unsigned threads, size_t bytes, const char* kernel = "one-shot", const char* second = "reset") {
    TimelineCta& c = timelineCta();
    const unsigned lanes = __activemask(), m = __reduce_max_sync(lanes, since());
    if (!leads(lanes)) return;
    atomicMax(&c.last, (unsigned long long)m);
    __threadfence_block();
    // The lanes counted at once: the CTA's last group of them publishes.
    const unsigned here = unsigned(__popc(lanes));
    if (atomicAdd(&c.done, here) + here != threads) return;
    __threadfence_block();
    const unsigned long long endNs = globalNs();
    unsigned long long* g = gTimeline;
    atomicAdd(&g[kTlPushSum], c.push);
    atomicMax(&g[kTlPushMax], c.push);
    atomicAdd(&g[kTlResetSum], c.reset);
    atomicMax(&g[kTlResetMax], c.reset);
    const unsigned long long firstMin = c.firstMin == ~0ull ? 0 : c.firstMin;
    atomicAdd(&g[kTlFirstSum], firstMin);
    atomicMax(&g[kTlFirstMax], c.firstMax);
    atomicAdd(&g[kTlLastSum], c.last);
    atomicMax(&g[kTlLastMax], c.last);
    atomicMin(&g[kTlStartMin], c.startNs);
    atomicMax(&g[kTlStartMax], c.startNs);
    atomicMin(&g[kTlEndMin], endNs);
    atomicMax(&g[kTlEndMax], endNs);
    __threadfence();
    if (atomicAdd(&g[kTlCtas], 1ull) != gridDim.x - 1) return;
    __threadfence();
    // The grid's last CTA: every other CTA's words are in (their fence before the count).
    unsigned long long v[kTlWords];
    for (int i = 0; i < kTlWords; ++i) v[i] = atomicAdd(&g[i], 0ull);
    const unsigned long long n = gridDim.x, calls = v[kTlCalls] + 1;
    if (calls % kTimelineEvery == 0)
      printf("# timeline %s bytes %llu ctas %u threads %u (cycles, mean / max over CTAs): pushed %llu / %llu, "
             "%s %llu / %llu, first pack %llu / %llu, last pack %llu / %llu; ns: starts spread %llu, "
             "ends spread %llu, first start to last end %llu\n",
             kernel, (unsigned long long)bytes, gridDim.x, threads, v[kTlPushSum] / n, v[kTlPushMax], second,
             v[kTlResetSum] / n, v[kTlResetMax], v[kTlFirstSum] / n, v[kTlFirstMax], v[kTlLastSum] / n, v[kTlLastMax],
             v[kTlStartMax] - v[kTlStartMin], v[kTlEndMax] - v[kTlEndMin], v[kTlEndMax] - v[kTlStartMin]);
    for (int i = 0; i < kTlWords; ++i) g[i] = (i == kTlStartMin || i == kTlEndMin) ? ~0ull : 0ull;
    g[kTlCalls] = calls;
  }
};

}  // namespace dev
}  // namespace fc
