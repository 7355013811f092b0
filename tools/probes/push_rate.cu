// push-rate: what NVLink lets a pair of GPUs do to each other's memory, apart from any
// library - the bounds under the 2-rank Lamport all-reduce (issue 44: its cells of 1-4
// MiB sit at 1.1-1.2x FlashInfer's kernel, the same algorithm). One process drives both
// GPUs of a pair (devices 0 and 1); both run their side at once, as the two ranks of an
// all-reduce do: a gate kernel on each GPU spins on one host-mapped word, and each
// timed graph (21 back-to-back launches, a multiple of 3 so that the Lamport kernel's
// buffer rotation lines up across replays) is queued behind it; the host opens both
// gates together. Time per launch = the replay's event time / 21, the max of the two
// GPUs, median of 9 replays. Memory is mapped the way libfusedcomm maps its symmetric
// heap (cuMem, the recommended granularity, read-write access for both GPUs), or with
// cudaMalloc + peer access (column map).
//   store      every thread of a grid-stride grid stores 16-byte packs into the peer
//              (U loads of the source, then U remote stores, in flight per thread)
//   store-1way the same from GPU 0 only (GPU 1 launches an empty grid)
//   store-sweep store, then the same number of 16-byte stores into a local buffer (the
//              one-shot's reset of the stale buffer, beside the pushes)
//   load       pulls: 16-byte loads from the peer, stored locally
//   ce         device-to-device cudaMemcpyAsync into the peer, both ways (the copy engines)
//   lamport-*  a minimal Lamport one-shot all-reduce of fp32 (push into the peer's
//              current buffer, then poll our own, add, store; three buffers in turn),
//              every variant checked exactly: -sweep resets the buffer of the call before
//              between push and poll (our one-shot kind's way, and TensorRT-LLM's), -clear
//              clears each pack once read (our Rows kind's way); then our one-shot kernel's
//              features added one at a time (kLamportVariants: per-CTA state, PDL, our
//              chunks, our buffer layout, the polls' back-off, a call warp, 1 CTA per SM,
//              512 or 256 data threads), at our one-shot's grid; then, on the closest of
//              them (-all3), the rest of ours: bf16 packs summed in fp32 in rank order and
//              rounded once (-bf16), the call warp's header exchange with the peer's same
//              CTA (-header: push, poll, reset of the call before's; the data threads do
//              not wait for it, the kernel's end does), and both (-ourslike)
//   pingpong   one thread per GPU: a word stored into the peer, the peer's answer
//              polled for; half the round trip = one-way latency (bytes column 4)
//   norm-*     (arguments HIDDENxTOKENS: rows of bf16) the bound under the all-reduce +
//              residual + RMSNorm (issue 44: ours <= the all-reduce + 1 us at 1-128 rows):
//              norm-oneshot, the minimal Lamport one-shot of the same bytes in bf16 at our
//              one-shot's grid; norm-row, the same sums with one CTA a row (up to 1024
//              threads, 1-2 packs each), what a norm needs before its sum of squares;
//              norm-minimal, norm-row plus the residual (loaded before the polls, as the
//              weight), residualOut, the row's sum of squares over the CTA and normOut:
//              the least a fused kernel does; then norm-minimal-* add our kernel's
//              features one at a time (normKernel). ctas = rows; checked against a host
//              reference (residualOut exact, normOut within bf16 rounding)
// Output: CSV on stdout, a header line first. Run on a node with 2 NVLink-connected
// GPUs: build/tools/probes/push-rate [bytes...] (default 64 KiB - 16 MiB).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "probe_check.h"

namespace {

constexpr int kLaunches = 21;  // per graph: a multiple of the Lamport kernel's 3 buffers
constexpr int kReplays = 9;
constexpr uint32_t kEmpty = 0xffffffffu;
constexpr unsigned long long kDeadlineNs = 2000000000ull;  // every spin gives up after 2 s

__device__ unsigned long long nowNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins until the host stores `epoch` into *gate (or 2 s pass: *failed set).
__global__ void gateKernel(const volatile int* gate, int epoch, int* failed) {
  const unsigned long long t0 = nowNs();
  while (*gate != epoch)
    if (nowNs() - t0 > kDeadlineNs) {
      *failed = 1;
      return;
    }
}

template <int U>
__global__ void storeKernel(const uint4* src, uint4* dst, uint4* sweep, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u * stride < n) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u * stride < n) dst[i + u * stride] = v[u];
  }
  if (sweep != nullptr) {
    const uint4 e{kEmpty, kEmpty, kEmpty, kEmpty};
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) sweep[i] = e;
  }
}

__device__ uint4 volatileLoad(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

__device__ bool ready(const uint4& v) {
  return v.x != kEmpty && v.y != kEmpty && v.z != kEmpty && v.w != kEmpty;
}

struct Bufs {
  uint4* b[3];
};

// The Lamport kernel's run-time switches (LamportVariant, below).
struct LamportOpts {
  bool clear = false, backoff = false, bf16 = false, header = false;
  int callWarp = 0;  // threads of the call warp (0: none)
  int rank = 0;      // this GPU's rank: bf16 sums go in rank order
  Bufs hdrPeer{}, hdrMine{};  // header slots, a pack per CTA: the peer's (we push) and ours
};

// x + y, 8 bf16 a pack, in fp32, rounded once (our one-shot's sum at 2 ranks, rank order).
__device__ uint4 addBf16(const uint4& x, const uint4& y) {
  const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
  uint32_t o[4];
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&xs[w]));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&ys[w]));
    const __nv_bfloat162 r = __floats2bfloat162_rn(a.x + b.x, a.y + b.y);
    o[w] = *reinterpret_cast<const uint32_t*>(&r);
  }
  return uint4{o[0], o[1], o[2], o[3]};
}

// The call warp's header exchange (lane 0): push this call's header into the peer's slot
// for our CTA in buffer call % 3, reset our slot of the call before (the peer writes it
// again in call + 2, after our call + 1 has started), poll ours for the peer's header.
__device__ void exchangeHeader(const LamportOpts& o, unsigned call, size_t n, int* failed) {
  if ((threadIdx.x & 31) != 0) return;
  const uint4 h{call + 1, unsigned(n), 0x600du, blockIdx.x};  // never all ones
  o.hdrPeer.b[call % 3][blockIdx.x] = h;
  o.hdrMine.b[(call + 2) % 3][blockIdx.x] = uint4{kEmpty, kEmpty, kEmpty, kEmpty};
  const uint4* mine = o.hdrMine.b[call % 3] + blockIdx.x;
  uint4 v = volatileLoad(mine);
  const unsigned long long t0 = nowNs();
  while (!ready(v)) {
    if (nowNs() - t0 > kDeadlineNs) {
      *failed = 1;
      return;
    }
    __nanosleep(100);
    v = volatileLoad(mine);
  }
  if (v.x != h.x || v.y != h.y || v.z != h.z || v.w != h.w) *failed = 2;  // a mismatch: the probe is wrong
}

// The minimal Lamport one-shot. The inputs are finite fp32, so no word of a pushed
// pack is kEmpty. clear: each pack cleared once read; else the buffer of the call
// before swept between push and poll (a peer is at most one call ahead, so it writes
// that buffer again only after our next call has started). The features of our own
// one-shot kernel, one at a time (the lamport-* modes):
//   kCtaState  the call count kept per CTA and moved on by the CTA itself (one kernel a
//              call), not by a second kernel (nextCall) after it
//   kPdl       programmatic dependent launch: wait for the previous grid first, let
//              the next launch once the pushes are out
//   kChunks    CTA b owns the 2 KiB chunks b, b + grid, ... (ours), not a grid stride
// and at run time (LamportVariant): backoff (a poll that misses sleeps 100 ns before
// the next, as ours does), callWarp (a 33rd warp that only reads the state and leaves,
// as our call warp takes no part in the data), and 1 CTA per SM (a large dynamic
// shared memory: with PDL the next call's CTAs cannot be resident beside this one's,
// as ours, at 50 registers x 1056 threads, cannot).
template <bool kCtaState, bool kPdl, bool kChunks>
__global__ void lamportKernel(const uint4* in, uint4* out, Bufs peer, Bufs mine, size_t n, unsigned* state,
                              LamportOpts o, int* failed) {
  if constexpr (kPdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  const unsigned dataThreads = blockDim.x - o.callWarp;
  const unsigned call = kCtaState ? state[blockIdx.x] : *state;
  if constexpr (kCtaState) {
    __syncthreads();  // every thread has read the count
    if (threadIdx.x == 0) state[blockIdx.x] = call + 1;
  }
  if (threadIdx.x >= dataThreads) {  // the call warp
    if (o.header) exchangeHeader(o, call, n, failed);
    return;
  }
  const bool clear = o.clear, backoff = o.backoff;
  // This thread's m-th pack; it grows with m.
  auto pack = [dataThreads](size_t m) -> size_t {
    if constexpr (kChunks) {
      const size_t k = threadIdx.x + m * dataThreads;
      return (blockIdx.x + (k / 128) * gridDim.x) * 128 + k % 128;
    } else {
      return size_t(blockIdx.x) * dataThreads + threadIdx.x + m * gridDim.x * dataThreads;
    }
  };
  uint4* cur = mine.b[call % 3];
  for (size_t m = 0, i; (i = pack(m)) < n; ++m) peer.b[call % 3][i] = in[i];
  if constexpr (kPdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (!clear) {
    const uint4 e{kEmpty, kEmpty, kEmpty, kEmpty};
    uint4* stale = mine.b[(call + 2) % 3];
    for (size_t m = 0, i; (i = pack(m)) < n; ++m) stale[i] = e;
  }
  for (size_t m = 0, i; (i = pack(m)) < n; ++m) {
    uint4 v = volatileLoad(cur + i);
    const unsigned long long t0 = nowNs();
    while (!ready(v)) {
      if (nowNs() - t0 > kDeadlineNs) {
        *failed = 1;
        return;
      }
      if (backoff) __nanosleep(100);
      v = volatileLoad(cur + i);
    }
    if (clear) cur[i] = uint4{kEmpty, kEmpty, kEmpty, kEmpty};
    const uint4 a = in[i];
    if (o.bf16)
      out[i] = o.rank == 0 ? addBf16(a, v) : addBf16(v, a);
    else
      out[i] = uint4{__float_as_uint(__uint_as_float(a.x) + __uint_as_float(v.x)),
                     __float_as_uint(__uint_as_float(a.y) + __uint_as_float(v.y)),
                     __float_as_uint(__uint_as_float(a.z) + __uint_as_float(v.z)),
                     __float_as_uint(__uint_as_float(a.w) + __uint_as_float(v.w))};
  }
}

// Moves the call counter on, after the Lamport kernel (stream order).
__global__ void nextCall(unsigned* callCounter) { ++*callCounter; }

// The minimal Lamport all-reduce (+ residual + RMSNorm with kNorm) of rows of bf16, one
// CTA a row of rowPacks packs (at most 2 a thread): per-CTA call count and PDL as
// lamportKernel's lamport-cta-pdl, the stale buffer swept between push and poll, no
// back-off, no call warp. The residual and the weight are loaded before the polls; the
// row's sum of squares (of residualOut as stored, bf16) crosses the CTA through shared
// memory once; normOut = residualOut * rsqrt(mean square + eps) * weight. Then our
// all-reduce + RMSNorm kernel's features, one at a time (NormOpts, the norm-minimal-*
// modes): the polls' back-off; each peer pack cleared once read instead of the sweep;
// the rank's state instead of the CTA's (every CTA reads one call count, arrives on a
// counter with an acq_rel atomic, the last moves the count on: our Rows kind); a call
// warp (CTA 0's exchanges a header with the peer's CTA 0, and with the rank's state the
// call warp arrives, as ours).
struct NormOpts {
  bool backoff = false, clear = false, rankState = false, callWarp = false;
  Bufs hdrPeer{}, hdrMine{};
};
constexpr int kNormMaxPacksPerThread = 3;  // 2048 packs over 992 data threads
template <bool kNorm>
__global__ void __launch_bounds__(1024) normKernel(const uint4* in, const uint4* residual, const uint4* weight,
                                                   uint4* resOut, uint4* normOut, Bufs peer, Bufs mine, int rowPacks,
                                                   unsigned* state, int rank, NormOpts o, int* failed) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  // The rank's state: word 0 the call count, word 1 the arrival counter (kept apart from
  // the per-CTA counts, which start at word 2).
  const unsigned call = o.rankState ? state[0] : state[2 + blockIdx.x];
  __syncthreads();  // every thread has read the count
  const unsigned dataThreads = blockDim.x - (o.callWarp ? 32 : 0);
  const bool arriver = o.callWarp ? threadIdx.x == blockDim.x - 1 : threadIdx.x == 0;
  if (o.rankState && arriver) {
    unsigned before;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(before) : "l"(state + 1) : "memory");
    if (before == gridDim.x - 1) {
      state[0] = call + 1;
      state[1] = 0;
    }
  } else if (!o.rankState && threadIdx.x == 0) {
    state[2 + blockIdx.x] = call + 1;
  }
  if (threadIdx.x >= dataThreads) {  // the call warp
    if (blockIdx.x == 0) {
      LamportOpts h;
      h.hdrPeer = o.hdrPeer;
      h.hdrMine = o.hdrMine;
      exchangeHeader(h, call, size_t(rowPacks) * gridDim.x, failed);
    }
    return;
  }
  const size_t base = size_t(blockIdx.x) * rowPacks;
  for (int p = threadIdx.x; p < rowPacks; p += dataThreads) peer.b[call % 3][base + p] = in[base + p];
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  uint4* stale = mine.b[(call + 2) % 3];
  if (!o.clear)
    for (int p = threadIdx.x; p < rowPacks; p += dataThreads) stale[base + p] = uint4{kEmpty, kEmpty, kEmpty, kEmpty};
  uint4* cur = mine.b[call % 3];
  uint4 x[kNormMaxPacksPerThread], w[kNormMaxPacksPerThread];
  float ss = 0.f;
  int j = 0;
  for (int p = threadIdx.x; p < rowPacks; p += dataThreads, ++j) {
    const uint4 a = in[base + p];
    uint4 r{};
    if constexpr (kNorm) {
      r = residual[base + p];
      w[j] = weight[p];
    }
    uint4 v = volatileLoad(cur + base + p);
    const unsigned long long t0 = nowNs();
    while (!ready(v)) {
      if (nowNs() - t0 > kDeadlineNs) {
        *failed = 1;
        return;
      }
      if (o.backoff) __nanosleep(100);
      v = volatileLoad(cur + base + p);
    }
    if (o.clear) cur[base + p] = uint4{kEmpty, kEmpty, kEmpty, kEmpty};
    const uint4 s = rank == 0 ? addBf16(a, v) : addBf16(v, a);
    if constexpr (!kNorm) {
      resOut[base + p] = s;
    } else {
      x[j] = addBf16(s, r);
      resOut[base + p] = x[j];
      const uint32_t xs[4] = {x[j].x, x[j].y, x[j].z, x[j].w};
      for (uint32_t u : xs) {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));
        ss += f.x * f.x + f.y * f.y;
      }
    }
  }
  if constexpr (kNorm) {
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = ss;
    // Only the data threads: a named barrier of their count (the call warp has left).
    asm volatile("bar.sync 1, %0;" ::"r"(dataThreads) : "memory");
    if (threadIdx.x < 32) {
      float t = threadIdx.x < (dataThreads + 31) / 32 ? part[threadIdx.x] : 0.f;
      for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
      if (threadIdx.x == 0) part[0] = t;
    }
    asm volatile("bar.sync 1, %0;" ::"r"(dataThreads) : "memory");
    const float scale = rsqrtf(part[0] / float(rowPacks * 8) + 1e-6f);
    j = 0;
    for (int p = threadIdx.x; p < rowPacks; p += dataThreads, ++j) {
      const uint32_t xs[4] = {x[j].x, x[j].y, x[j].z, x[j].w}, ws[4] = {w[j].x, w[j].y, w[j].z, w[j].w};
      uint32_t o[4];
      for (int k = 0; k < 4; ++k) {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&xs[k]));
        const float2 g = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&ws[k]));
        const __nv_bfloat162 q = __floats2bfloat162_rn(f.x * scale * g.x, f.y * scale * g.y);
        o[k] = *reinterpret_cast<const uint32_t*>(&q);
      }
      normOut[base + p] = uint4{o[0], o[1], o[2], o[3]};
    }
  }
}

// One thread each: GPU 0 stores i into the peer's word and waits for i back; GPU 1
// waits for i and answers. ns: GPU 0's time for `rounds` round trips.
__global__ void pingPong(volatile int* mine, volatile int* peer, int rounds, bool first, unsigned long long* ns,
                         int* failed) {
  const unsigned long long t0 = nowNs();
  for (int i = 1; i <= rounds; ++i) {
    if (first) *peer = i;
    while (*mine != i)
      if (nowNs() - t0 > kDeadlineNs) {
        *failed = 1;
        return;
      }
    if (!first) *peer = i;
  }
  if (first) *ns = nowNs() - t0;
}

using CuMemCreate = CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long);
using CuMemAddressReserve = CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
using CuMemMap = CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
using CuMemSetAccess = CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
using CuMemGetAllocationGranularity = CUresult (*)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags);

template <typename F>
F entry(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion(name, &p, 10020, cudaEnableDefault, &q));
  if (p == nullptr || q != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "push-rate: driver entry point %s unavailable\n", name);
    std::exit(1);
  }
  return reinterpret_cast<F>(p);
}

#define CU(x)                                                                    \
  do {                                                                           \
    const CUresult r_ = (x);                                                     \
    if (r_ != CUDA_SUCCESS) {                                                    \
      std::fprintf(stderr, "%s:%d: %s: CUresult %d\n", __FILE__, __LINE__, #x, int(r_)); \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

// bf16 bits of an fp32 value that bf16 holds exactly (small integers), and back.
uint16_t bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return uint16_t(u >> 16);
}
float bf16Value(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// bytes on GPU dev, read-write for both GPUs: cuMem as libfusedcomm's heap, or cudaMalloc.
void* allocShared(int dev, size_t bytes, bool cumem) {
  CK(cudaSetDevice(dev));
  if (!cumem) {
    void* p = nullptr;
    CK(cudaMalloc(&p, bytes));
    return p;
  }
  static const auto create = entry<CuMemCreate>("cuMemCreate");
  static const auto reserve = entry<CuMemAddressReserve>("cuMemAddressReserve");
  static const auto map = entry<CuMemMap>("cuMemMap");
  static const auto setAccess = entry<CuMemSetAccess>("cuMemSetAccess");
  static const auto granularity = entry<CuMemGetAllocationGranularity>("cuMemGetAllocationGranularity");
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  CU(granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  bytes = (bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  CU(create(&h, bytes, &prop, 0));
  CU(reserve(&va, bytes, gran, 0, 0));
  CU(map(va, bytes, 0, h, 0));
  CUmemAccessDesc access[2] = {};
  for (int d = 0; d < 2; ++d) {
    access[d].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access[d].location.id = d;
    access[d].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  CU(setAccess(va, bytes, access, 2));
  return reinterpret_cast<void*>(va);
}

struct Pair {
  cudaStream_t s[2];
  cudaEvent_t a[2], b[2];
  int* gate;      // host-mapped
  int* failed[2]; // device
  int epoch = 0;
};

// Replays graph g[d] on both GPUs at once, kReplays times: the median over replays of
// the slower GPU's time per launch, us.
double timeBoth(Pair& p, cudaGraphExec_t g[2], int launches) {
  std::vector<double> t;
  for (int r = 0; r < kReplays; ++r) {
    ++p.epoch;
    for (int d = 0; d < 2; ++d) {
      CK(cudaSetDevice(d));
      int* gate = nullptr;
      CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&gate), p.gate, 0));
      gateKernel<<<1, 1, 0, p.s[d]>>>(gate, p.epoch, p.failed[d]);
      CK(cudaGetLastError());
      CK(cudaEventRecord(p.a[d], p.s[d]));
      CK(cudaGraphLaunch(g[d], p.s[d]));
      CK(cudaEventRecord(p.b[d], p.s[d]));
    }
    *reinterpret_cast<volatile int*>(p.gate) = p.epoch;
    float worst = 0.f;
    for (int d = 0; d < 2; ++d) {
      CK(cudaSetDevice(d));
      CK(cudaStreamSynchronize(p.s[d]));
      int failed = 0;
      CK(cudaMemcpy(&failed, p.failed[d], sizeof failed, cudaMemcpyDeviceToHost));
      if (failed) {
        std::fprintf(stderr, "push-rate: GPU %d: %s\n", d,
                     failed == 2 ? "a header from the peer was not this call's (the probe's protocol is wrong)"
                                 : "a spin gave up after 2 s (gate or poll)");
        std::exit(1);
      }
      float ms = 0.f;
      CK(cudaEventElapsedTime(&ms, p.a[d], p.b[d]));
      worst = std::max(worst, ms);
    }
    t.push_back(1000.0 * worst / launches);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Captures `launches` calls of enqueue(d, stream) into a graph per GPU.
template <typename F>
void capture(Pair& p, cudaGraphExec_t g[2], int launches, F enqueue) {
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    cudaGraph_t graph;
    CK(cudaStreamBeginCapture(p.s[d], cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < launches; ++i) enqueue(d, p.s[d]);
    CK(cudaStreamEndCapture(p.s[d], &graph));
    CK(cudaGraphInstantiate(&g[d], graph, 0));
    CK(cudaGraphDestroy(graph));
  }
}

void release(cudaGraphExec_t g[2]) {
  for (int d = 0; d < 2; ++d) CK(cudaGraphExecDestroy(g[d]));
}

template <int U>
void launchStore(int grid, int threads, cudaStream_t s, const uint4* src, uint4* dst, uint4* sweep, size_t n) {
  storeKernel<U><<<grid, threads, 0, s>>>(src, dst, sweep, n);
  CK(cudaGetLastError());
}

void launchStoreU(int u, int grid, int threads, cudaStream_t s, const uint4* src, uint4* dst, uint4* sweep,
                  size_t n) {
  if (u == 1) launchStore<1>(grid, threads, s, src, dst, sweep, n);
  else if (u == 2) launchStore<2>(grid, threads, s, src, dst, sweep, n);
  else launchStore<4>(grid, threads, s, src, dst, sweep, n);
}

struct LamportVariant {
  const char* name;
  bool clear, ctaState, pdl, chunks, oursLayout;
  bool backoff = false, callWarp = false, oneCtaPerSm = false;
  int maxThreads = 1024;  // data threads per CTA at most (ours: 512, chunks.cuh kThreads)
  bool bf16 = false, header = false;  // bf16 sums in rank order; the call warp's headers
};
constexpr LamportVariant kLamportVariants[] = {
    {"lamport-sweep", false, false, false, false, false},
    {"lamport-clear", true, false, false, false, false},
    {"lamport-cta", false, true, false, false, false},
    {"lamport-cta-pdl", false, true, true, false, false},
    {"lamport-cta-pdl-chunks", false, true, true, true, false},
    {"lamport-ours-layout", false, true, true, true, true},
    {"lamport-ours-layout-clear", true, true, true, true, true},
    {"lamport-ours-backoff", false, true, true, true, true, true, false, false},
    {"lamport-ours-1cta", false, true, true, true, true, false, false, true},
    {"lamport-ours-512", false, true, true, true, true, false, false, false, 512},
    {"lamport-ours-512-callwarp", false, true, true, true, true, false, true, false, 512},
    {"lamport-ours-512-all3", false, true, true, true, true, true, true, true, 512},
    {"lamport-ours-256", false, true, true, true, true, false, false, false, 256},
    {"lamport-ours-512-all3-bf16", false, true, true, true, true, true, true, true, 512, true, false},
    {"lamport-ours-512-all3-header", false, true, true, true, true, true, true, true, 512, false, true},
    {"lamport-ours-512-ourslike", false, true, true, true, true, true, true, true, 512, true, true},
};
constexpr size_t kOneCtaSmem = 120 << 10;  // more than half an SM's shared memory

template <bool kCtaState, bool kPdl, bool kChunks>
void launchLamportAs(const LamportVariant& v, int grid, int threads, cudaStream_t s, const uint4* in, uint4* out,
                     const Bufs& peer, const Bufs& mine, size_t n, unsigned* state, LamportOpts o, int* failed) {
  cudaLaunchAttribute attr;
  o.clear = v.clear;
  o.backoff = v.backoff;
  o.bf16 = v.bf16;
  o.header = v.header;
  o.callWarp = v.callWarp || v.header ? 32 : 0;
  threads = std::min(threads, v.maxThreads);
  cudaLaunchConfig_t cfg = pdlLaunchConfig(dim3(grid), dim3(threads + o.callWarp), s, &attr);
  cfg.numAttrs = kPdl ? 1 : 0;
  cfg.dynamicSmemBytes = v.oneCtaPerSm ? kOneCtaSmem : 0;
  CK(cudaLaunchKernelEx(&cfg, lamportKernel<kCtaState, kPdl, kChunks>, in, out, peer, mine, n, state, o, failed));
  if constexpr (!kCtaState) {
    nextCall<<<1, 1, 0, s>>>(state);
    CK(cudaGetLastError());
  }
}

void launchLamport(const LamportVariant& v, int grid, int threads, cudaStream_t s, const uint4* in, uint4* out,
                   const Bufs& peer, const Bufs& mine, size_t n, unsigned* state, const LamportOpts& o, int* failed) {
  if (!v.ctaState) launchLamportAs<false, false, false>(v, grid, threads, s, in, out, peer, mine, n, state, o, failed);
  else if (!v.pdl) launchLamportAs<true, false, false>(v, grid, threads, s, in, out, peer, mine, n, state, o, failed);
  else if (!v.chunks) launchLamportAs<true, true, false>(v, grid, threads, s, in, out, peer, mine, n, state, o, failed);
  else launchLamportAs<true, true, true>(v, grid, threads, s, in, out, peer, mine, n, state, o, failed);
}

}  // namespace

int main(int argc, char** argv) {
  requireGpu();
  int n = 0, access = 0;
  CK(cudaGetDeviceCount(&n));
  if (n >= 2) CK(cudaDeviceCanAccessPeer(&access, 0, 1));
  if (n < 2 || !access) {
    std::printf("SKIP: push-rate needs 2 GPUs that can access each other (%d visible)\n", n);
    return 77;
  }
  std::vector<size_t> sizes;
  struct NormCase {
    size_t hidden, tokens;  // rows of bf16
  };
  std::vector<NormCase> norms;
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    const size_t v = std::strtoull(argv[i], &end, 0);
    if (*end == 'x') {
      const NormCase c{v, std::strtoull(end + 1, nullptr, 0)};
      if (c.hidden % 8 != 0 || c.hidden / 8 > 2048 || c.tokens == 0 || c.tokens > 1024) {
        std::fprintf(stderr, "push-rate: %s: hidden a multiple of 8 up to 16384, tokens 1-1024\n", argv[i]);
        return 2;
      }
      norms.push_back(c);
    } else {
      sizes.push_back(v);
    }
  }
  if (sizes.empty() && norms.empty())
    sizes = {size_t(64) << 10, size_t(256) << 10, size_t(1) << 20, size_t(4) << 20, size_t(16) << 20};
  size_t maxBytes = 32 << 10;  // the norm's weight
  for (size_t b : sizes) maxBytes = std::max(maxBytes, b);
  for (const NormCase& c : norms) maxBytes = std::max(maxBytes, c.hidden * c.tokens * 2);
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  Pair p;
  CK(cudaHostAlloc(reinterpret_cast<void**>(&p.gate), sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  *p.gate = 0;
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CK(cudaStreamCreateWithFlags(&p.s[d], cudaStreamNonBlocking));
    CK(cudaEventCreate(&p.a[d]));
    CK(cudaEventCreate(&p.b[d]));
    CK(cudaMalloc(&p.failed[d], sizeof(int)));
    CK(cudaMemset(p.failed[d], 0, sizeof(int)));
  }
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaFuncSetAttribute(lamportKernel<true, true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            int(kOneCtaSmem)));
  }
  std::printf("# push-rate: 2 GPUs (%d SMs each), graphs of %d launches, median of %d replays, max of the two GPUs\n",
              sms, kLaunches, kReplays);
  std::printf("mode,map,bytes,ctas,threads,unroll,us,GBps\n");
  auto row = [](const char* mode, const char* map, size_t bytes, int ctas, int threads, int u, double us) {
    std::printf("%s,%s,%zu,%d,%d,%d,%.2f,%.1f\n", mode, map, bytes, ctas, threads, u, us, bytes / us / 1e3);
    std::fflush(stdout);
  };

  for (int cumem = 1; cumem >= 0; --cumem) {
    const char* map = cumem ? "cumem" : "malloc";
    // Per GPU: src (local input), dst (written by the peer), sweep (local), out, the
    // three Lamport buffers.
    uint4 *src[2], *srcBf16[2], *dst[2], *sweep[2], *out[2];
    Bufs lb[2], heap[2], hdr[2];
    unsigned* counter[2];
    for (int d = 0; d < 2; ++d) {
      src[d] = static_cast<uint4*>(allocShared(d, maxBytes, cumem));
      srcBf16[d] = static_cast<uint4*>(allocShared(d, maxBytes, cumem));
      for (auto& b : hdr[d].b) b = static_cast<uint4*>(allocShared(d, 1024 * sizeof(uint4), cumem));
      dst[d] = static_cast<uint4*>(allocShared(d, maxBytes, cumem));
      sweep[d] = static_cast<uint4*>(allocShared(d, maxBytes, cumem));
      out[d] = static_cast<uint4*>(allocShared(d, maxBytes, cumem));
      for (auto& b : lb[d].b) b = static_cast<uint4*>(allocShared(d, maxBytes, cumem));
      // Our layout: buffer b at b * 4 slots of one allocation.
      uint8_t* base = static_cast<uint8_t*>(allocShared(d, 12 * maxBytes, cumem));
      for (int b = 0; b < 3; ++b) heap[d].b[b] = reinterpret_cast<uint4*>(base + size_t(b) * 4 * maxBytes);
      CK(cudaSetDevice(d));
      CK(cudaMalloc(&counter[d], 2048 * sizeof(unsigned)));
      // Inputs: small integers in fp32 (exact sums), different on each GPU.
      std::vector<float> h(maxBytes / 4);
      for (size_t i = 0; i < h.size(); ++i) h[i] = float((i * 7 + d * 13) % 1000);
      CK(cudaMemcpy(src[d], h.data(), maxBytes, cudaMemcpyHostToDevice));
      // And in bf16: integers below 100, so that every sum (< 256) is exact in bf16 too.
      std::vector<uint16_t> hb(maxBytes / 2);
      for (size_t i = 0; i < hb.size(); ++i) hb[i] = bf16Bits(float((i * 7 + d * 13) % 100));
      CK(cudaMemcpy(srcBf16[d], hb.data(), maxBytes, cudaMemcpyHostToDevice));
    }
    for (size_t bytes : sizes) {
      const size_t packs = bytes / 16;
      cudaGraphExec_t g[2];
      // Pushes: the grid shapes of our one-shot (128 x 1024 at 4 MiB) and around it.
      for (const char* mode : {"store", "store-sweep", "store-1way"}) {
        const std::string m = mode;
        for (int ctas : {sms / 2, 128, sms, 2 * sms})
          for (int threads : {256, 512, 1024})
            for (int u : {1, 2, 4}) {
              if (m != "store" && (threads != 1024 || u != 1) && !(threads == 512 && u == 2)) continue;
              capture(p, g, kLaunches, [&](int d, cudaStream_t s) {
                if (m == "store-1way" && d == 1) launchStoreU(1, 1, 32, s, src[d], dst[1 - d], nullptr, 0);
                else launchStoreU(u, ctas, threads, s, src[d], dst[1 - d], m == "store-sweep" ? sweep[d] : nullptr, packs);
              });
              row(mode, map, bytes, ctas, threads, u, timeBoth(p, g, kLaunches));
              release(g);
            }
      }
      for (int ctas : {sms, 2 * sms})
        for (int u : {1, 4}) {
          // The store kernel with the peer as its source: loads over NVLink, local stores.
          capture(p, g, kLaunches,
                  [&](int d, cudaStream_t s) { launchStoreU(u, ctas, 1024, s, dst[1 - d], out[d], nullptr, packs); });
          row("load", map, bytes, ctas, 1024, u, timeBoth(p, g, kLaunches));
          release(g);
        }
      capture(p, g, kLaunches, [&](int d, cudaStream_t s) { CK(cudaMemcpyAsync(dst[1 - d], src[d], bytes, cudaMemcpyDeviceToDevice, s)); });
      row("ce", map, bytes, 0, 0, 0, timeBoth(p, g, kLaunches));
      release(g);
      // The minimal Lamport one-shot at our one-shot's grid (2 KiB chunks, one CTA per
      // chunk up to 128 CTAs, each with 128 threads a chunk up to 1024), our kernel's
      // features added one at a time, then in our buffer layout (the three buffers in
      // one allocation, four slots apart: device_comm.h).
      const size_t chunks = (packs + 127) / 128;
      const int ctas = int(std::min<size_t>(chunks, 128));
      const int threads = int(std::min<size_t>(1024, (chunks + ctas - 1) / ctas * 128));
      for (const LamportVariant& v : kLamportVariants) {
        for (int d = 0; d < 2; ++d) {
          CK(cudaSetDevice(d));
          for (const Bufs* bufs : {&lb[d], &heap[d]})
            for (uint4* b : bufs->b) CK(cudaMemset(b, 0xff, maxBytes));
          for (uint4* b : hdr[d].b) CK(cudaMemset(b, 0xff, 1024 * sizeof(uint4)));
          CK(cudaMemset(counter[d], 0, 2048 * sizeof(unsigned)));
          CK(cudaMemset(out[d], 0xff, maxBytes));
          CK(cudaDeviceSynchronize());
        }
        capture(p, g, kLaunches, [&](int d, cudaStream_t s) {
          const Bufs& peer = v.oursLayout ? heap[1 - d] : lb[1 - d];
          const Bufs& mine = v.oursLayout ? heap[d] : lb[d];
          LamportOpts o;
          o.rank = d;
          o.hdrPeer = hdr[1 - d];
          o.hdrMine = hdr[d];
          launchLamport(v, ctas, threads, s, v.bf16 ? srcBf16[d] : src[d], out[d], peer, mine, packs, counter[d], o,
                        p.failed[d]);
        });
        const double us = timeBoth(p, g, kLaunches);
        release(g);
        // Exact: out = the two inputs' sum on both GPUs (fp32, or bf16 read as fp32).
        const size_t elems = bytes / (v.bf16 ? 2 : 4);
        auto download = [&](const uint4* from) {
          std::vector<float> f(elems);
          if (v.bf16) {
            std::vector<uint16_t> b(elems);
            CK(cudaMemcpy(b.data(), from, bytes, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < elems; ++i) f[i] = bf16Value(b[i]);
          } else {
            CK(cudaMemcpy(f.data(), from, bytes, cudaMemcpyDeviceToHost));
          }
          return f;
        };
        const std::vector<float> h0 = download(v.bf16 ? srcBf16[0] : src[0]), h1 = download(v.bf16 ? srcBf16[1] : src[1]);
        for (int d = 0; d < 2; ++d) {
          const std::vector<float> o = download(out[d]);
          for (size_t i = 0; i < o.size(); ++i)
            if (o[i] != h0[i] + h1[i]) {
              std::fprintf(stderr, "push-rate: %s on GPU %d: element %zu is %g, want %g\n", v.name, d, i, o[i],
                           h0[i] + h1[i]);
              return 1;
            }
        }
        row(v.name, map, bytes, ctas, std::min(threads, v.maxThreads), 1, us);
      }
    }
    // The all-reduce + residual + RMSNorm's bound: the norm-* modes per case.
    if (cumem)
      for (const NormCase& c : norms) {
        const size_t bytes = c.hidden * c.tokens * 2, packs = bytes / 16;
        const int rowPacks = int(c.hidden / 8);
        // Data threads: a pack each up to 1024 (992 beside a call warp), then 2-3.
        const int rowThreadsAll = std::min(1024, (rowPacks + 31) / 32 * 32);
        // Per GPU: the residual (small integers, so that residualOut is exact) and the
        // weight; normOut in `sweep` (unused here).
        std::vector<uint16_t> resid(bytes / 2), weight(c.hidden);
        for (size_t i = 0; i < resid.size(); ++i) resid[i] = bf16Bits(float((i * 3 + 5) % 50));
        for (size_t i = 0; i < weight.size(); ++i) weight[i] = bf16Bits(1.0f + float(i % 7) / 8.0f);
        for (int d = 0; d < 2; ++d) {
          CK(cudaSetDevice(d));
          CK(cudaMemcpy(dst[d], resid.data(), bytes, cudaMemcpyHostToDevice));  // the residual
          CK(cudaMemcpy(src[d], weight.data(), c.hidden * 2, cudaMemcpyHostToDevice));  // the weight
        }
        const size_t chunks = (packs + 127) / 128;
        const int ctas = int(std::min<size_t>(chunks, 128));
        const int threads = int(std::min<size_t>(1024, (chunks + ctas - 1) / ctas * 128));
        cudaGraphExec_t g0[2];
        const LamportVariant oneShot{"norm-oneshot", false, true, true, true, false, false, false, false, 1024, true};
        // 0 norm-oneshot, 1 norm-row, 2 norm-minimal, then ours' features added one at a
        // time (NormOpts): 3 back-off, 4 clear on read, 5 the rank's state, 6 a call warp.
        for (int mode = 0; mode < 7; ++mode) {
          NormOpts no;
          no.backoff = mode >= 3;
          no.clear = mode >= 4;
          no.rankState = mode >= 5;
          no.callWarp = mode >= 6;
          const int rowThreads = no.callWarp ? std::min(992, rowThreadsAll) : rowThreadsAll;
          for (int d = 0; d < 2; ++d) {
            CK(cudaSetDevice(d));
            for (uint4* b : hdr[d].b) CK(cudaMemset(b, 0xff, 1024 * sizeof(uint4)));
            for (uint4* b : lb[d].b) CK(cudaMemset(b, 0xff, maxBytes));
            CK(cudaMemset(counter[d], 0, 2048 * sizeof(unsigned)));
            CK(cudaMemset(out[d], 0xff, maxBytes));
            CK(cudaMemset(sweep[d], 0xff, maxBytes));
            CK(cudaDeviceSynchronize());
          }
          capture(p, g0, kLaunches, [&](int d, cudaStream_t s) {
            if (mode == 0) {
              LamportOpts o;
              o.rank = d;
              launchLamport(oneShot, ctas, threads, s, srcBf16[d], out[d], lb[1 - d], lb[d], packs, counter[d], o,
                            p.failed[d]);
              return;
            }
            cudaLaunchAttribute attr;
            cudaLaunchConfig_t cfg =
                pdlLaunchConfig(dim3(unsigned(c.tokens)), dim3(rowThreads + (no.callWarp ? 32 : 0)), s, &attr);
            NormOpts o = no;
            o.hdrPeer = hdr[1 - d];
            o.hdrMine = hdr[d];
            CK(cudaLaunchKernelEx(&cfg, mode == 1 ? normKernel<false> : normKernel<true>,
                                  static_cast<const uint4*>(srcBf16[d]), static_cast<const uint4*>(dst[d]),
                                  static_cast<const uint4*>(src[d]), out[d], sweep[d], lb[1 - d], lb[d], rowPacks,
                                  counter[d], d, o, p.failed[d]));
          });
          const double us = timeBoth(p, g0, kLaunches);
          release(g0);
          // Check: residualOut (out) = in0 + in1 (+ residual), exact; normOut within
          // bf16 rounding of the host's.
          const size_t elems = bytes / 2;
          std::vector<uint16_t> in0(elems), in1(elems), got(elems), gotNorm(elems);
          CK(cudaMemcpy(in0.data(), srcBf16[0], bytes, cudaMemcpyDeviceToHost));
          CK(cudaMemcpy(in1.data(), srcBf16[1], bytes, cudaMemcpyDeviceToHost));
          for (int d = 0; d < 2; ++d) {
            CK(cudaMemcpy(got.data(), out[d], bytes, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(gotNorm.data(), sweep[d], bytes, cudaMemcpyDeviceToHost));
            for (size_t row = 0; row < c.tokens; ++row) {
              double ss = 0;
              for (size_t k = 0; k < c.hidden; ++k) {
                const size_t i = row * c.hidden + k;
                const float want = bf16Value(in0[i]) + bf16Value(in1[i]) + (mode >= 2 ? bf16Value(resid[i]) : 0.f);
                ss += double(want) * want;
                if (bf16Value(got[i]) != want) {
                  std::fprintf(stderr, "push-rate: norm mode %d, %zux%zu, GPU %d: element %zu is %g, want %g\n", mode,
                               c.hidden, c.tokens, d, i, bf16Value(got[i]), want);
                  return 1;
                }
              }
              if (mode < 2) continue;
              const double scale = 1.0 / std::sqrt(ss / double(c.hidden) + 1e-6);
              for (size_t k = 0; k < c.hidden; ++k) {
                const size_t i = row * c.hidden + k;
                const double want = bf16Value(got[i]) * scale * bf16Value(weight[k]);
                if (std::fabs(bf16Value(gotNorm[i]) - want) > 1e-2 * std::fabs(want) + 1e-3) {
                  std::fprintf(stderr, "push-rate: norm mode %d, %zux%zu, GPU %d: normOut %zu is %g, want %g\n", mode,
                               c.hidden, c.tokens, d, i, bf16Value(gotNorm[i]), want);
                  return 1;
                }
              }
            }
          }
          const char* const names[] = {"norm-oneshot",         "norm-row",
                                       "norm-minimal",         "norm-minimal-backoff",
                                       "norm-minimal-clear",   "norm-minimal-rankstate",
                                       "norm-minimal-ourslike"};
          const char* name = names[mode];
          if (mode == 0) row(name, map, bytes, ctas, threads, 1, us);
          else row(name, map, bytes, int(c.tokens), rowThreads + (no.callWarp ? 32 : 0), 1, us);
        }
      }
    // One-way latency: half a round trip of one word, 1000 rounds.
    if (cumem) {
      int* word[2];
      unsigned long long* ns;
      for (int d = 0; d < 2; ++d) {
        word[d] = static_cast<int*>(allocShared(d, 4096, true));
        CK(cudaSetDevice(d));
        CK(cudaMemset(word[d], 0, 4096));
        CK(cudaDeviceSynchronize());
      }
      CK(cudaSetDevice(0));
      CK(cudaMalloc(&ns, sizeof *ns));
      const int rounds = 1000;
      for (int d = 1; d >= 0; --d) {
        CK(cudaSetDevice(d));
        pingPong<<<1, 1, 0, p.s[d]>>>(word[d], word[1 - d], rounds, d == 0, ns, p.failed[d]);
        CK(cudaGetLastError());
      }
      for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaStreamSynchronize(p.s[d]));
      }
      unsigned long long h = 0;
      CK(cudaMemcpy(&h, ns, sizeof h, cudaMemcpyDeviceToHost));
      row("pingpong", map, 4, 1, 1, 1, h / 1e3 / rounds / 2);
    }
  }
  return 0;
}
