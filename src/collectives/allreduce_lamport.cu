// Lamport one-shot all-reduce: the small-message path of fcAllReduceOneShot and
// fcAllReduce (TensorRT-LLM's "Lamport" all-reduce idea; our own protocol below).
//
// No flags and no barrier: every rank pushes its input straight into a slot of every
// peer's push buffer (16-byte remote stores), and every rank polls its own buffer
// until each sender's packs are there, then sums in fp32 and rounds once. "There"
// means no 32-bit word still holds kLamportEmpty (all ones): writers never write that
// word (an all-ones word is a NaN pattern; it is turned into another NaN, so sums are
// unchanged), and readers reset what they consumed.
//
// Reuse without barriers, per CTA (CTA b owns chunks c = b (mod maxCtas), on every
// rank), with three buffers used in turn (run j of CTA b uses buffer j % 3):
// - a peer can be at most one run ahead of us: its run j+1 cannot finish before it
//   has read our run-(j+1) pushes, which we make only after our run j finished;
// - so in run j, buffer (j+1) % 3 may already be filling with a fast peer's data,
//   buffer j % 3 is ours to read, and buffer (j+2) % 3 - used in run j-1 and fully
//   read then - is free: run j resets it (every chunk run j-1 used) for run j+2,
//   which no peer can start before our run j+1 has started, i.e. after this kernel.
// The buffer index and the chunk counts per buffer live in device memory (graph
// replays continue the sequence).
#include "collectives/chunks.cuh"
#include "collectives/collectives.h"
#include "collectives/dispatch.cuh"
#include "collectives/launch.h"
#include "core/result.h"
#include "device/sync.cuh"

namespace fc {
namespace {

using dev::kChunkBytes;
using dev::kThreads;

__device__ __forceinline__ dev::Pack loadVolatilePack(const dev::Pack* p) {
  dev::Pack v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

__device__ __forceinline__ bool packReady(const dev::Pack& v) {
  return v.x != kLamportEmpty && v.y != kLamportEmpty && v.z != kLamportEmpty && v.w != kLamportEmpty;
}

// An all-ones word is a NaN (two for 16-bit types): make it another NaN.
__device__ __forceinline__ uint32_t notEmpty(uint32_t w) { return w == kLamportEmpty ? 0x7fffffffu : w; }

template <typename T, int NR>
__global__ void __launch_bounds__(kThreads)
    allReduceLamportKernel(DeviceComm dc, int channel, const T* in, T* out, size_t count) {
  constexpr size_t kChunkElems = kChunkBytes / sizeof(T);
  constexpr int E = dev::PackTraits<T>::kElems;
  const int W = NR > 0 ? NR : dc.nranks;
  const int rank = dc.rank;
  const size_t ctas = size_t(dc.maxCtas);
  const uint32_t nchunks = uint32_t((count + kChunkElems - 1) / kChunkElems);
  const bool vecIn = dev::aligned16(in), vecOut = dev::aligned16(out);

  // {buffer index, chunks used in buffer 0, 1, 2}, private to this rank's CTA.
  uint32_t* state = reinterpret_cast<uint32_t*>(dc.base + size_t(rank) * dc.stride + kLamportStateOffset) +
                    (size_t(channel) * kMaxBlocks + blockIdx.x) * 4;
  const uint32_t buf = state[0];
  const uint32_t stale = (buf + 2) % 3, staleChunks = state[1 + stale];
  const size_t channelOff = dc.lamportOffset + size_t(channel) * lamportChannelBytes(W);
  // Slot `sender` of buffer `b` on rank `owner`.
  auto slot = [&](int owner, uint32_t b, int sender) {
    return dc.base + size_t(owner) * dc.stride + channelOff +
           (size_t(b) * size_t(W) + size_t(sender)) * kLamportSlotBytes;
  };

  // 1. Push our packs into our slot of every rank's current buffer.
  for (size_t c = blockIdx.x; c < nchunks; c += ctas) {
    const size_t i = c * kChunkElems + size_t(threadIdx.x) * E;
    if (i >= count) continue;
    dev::Pack v;
    if (vecIn && i + E <= count) {
      v = *reinterpret_cast<const dev::Pack*>(in + i);
    } else {  // tail or misaligned: elements past the end read as zero
      T* e = reinterpret_cast<T*>(&v);
      for (int k = 0; k < E; ++k) e[k] = i + k < count ? in[i + k] : T(0.f);
    }
    v = dev::Pack{notEmpty(v.x), notEmpty(v.y), notEmpty(v.z), notEmpty(v.w)};
    const size_t off = i * sizeof(T);
#pragma unroll 8
    for (int j = 0; j < W; ++j) {
      const int r = (rank + j) % W;
      *reinterpret_cast<dev::Pack*>(slot(r, buf, rank) + off) = v;
    }
  }

  // 2. Poll our buffer for every sender's packs; sum; store.
  int failed = 0;
  for (size_t c = blockIdx.x; c < nchunks && !failed; c += ctas) {
    const size_t i = c * kChunkElems + size_t(threadIdx.x) * E;
    if (i >= count) continue;
    const size_t off = i * sizeof(T);
    float acc[E];
#pragma unroll
    for (int k = 0; k < E; ++k) acc[k] = 0.f;
    if constexpr (NR > 0) {
      // All senders' loads in flight at once; re-poll only the packs still missing.
      const dev::Pack* p[NR];
      dev::Pack v[NR];
#pragma unroll
      for (int j = 0; j < NR; ++j) {
        p[j] = reinterpret_cast<const dev::Pack*>(slot(rank, buf, (rank + j) % NR) + off);
        v[j] = loadVolatilePack(p[j]);
      }
      bool ready = true;
#pragma unroll
      for (int j = 0; j < NR; ++j) ready = ready && packReady(v[j]);
      if (!ready) {
        dev::WaitExits exits;
        for (uint32_t spin = 1; !ready; ++spin) {
          // Back off between rounds: tens of thousands of threads re-polling at full
          // rate compete with the incoming remote writes for the same L2.
          __nanosleep(100);
          ready = true;
#pragma unroll
          for (int j = 0; j < NR; ++j) {
            if (!packReady(v[j])) v[j] = loadVolatilePack(p[j]);
            ready = ready && packReady(v[j]);
          }
          if (!ready && (spin & 1023u) == 0u) {
            int missing = 0;
#pragma unroll
            for (int j = 0; j < NR; ++j)
              if (!packReady(v[j])) missing = (rank + j) % NR;
            if (exits.giveUp(dc, Op::AllReduceOneShot, missing, channel, buf, 0)) {
              failed = 1;
              break;
            }
          }
        }
      }
#pragma unroll
      for (int j = 0; j < NR; ++j) dev::accumulate<T>(acc, v[j]);
    } else {
      for (int j = 0; j < W && !failed; ++j) {
        const int s = (rank + j) % W;
        const dev::Pack* p = reinterpret_cast<const dev::Pack*>(slot(rank, buf, s) + off);
        dev::Pack v = loadVolatilePack(p);
        if (!packReady(v)) {
          dev::WaitExits exits;
          for (uint32_t spin = 1; !packReady(v = loadVolatilePack(p)); ++spin, __nanosleep(100))
            if ((spin & 1023u) == 0u && exits.giveUp(dc, Op::AllReduceOneShot, s, channel, buf, 0)) {
              failed = 1;
              break;
            }
        }
        dev::accumulate<T>(acc, v);
      }
    }
    if (!failed) dev::storePack(out, i, count, dev::toPack<T>(acc), vecOut);
  }
  if (__syncthreads_or(failed)) return;

  // 3. Reset the buffer of our previous run (every sender's slot, every chunk that
  //    run used) for the run after next; then advance.
  const dev::Pack empty{kLamportEmpty, kLamportEmpty, kLamportEmpty, kLamportEmpty};
  for (size_t c = blockIdx.x; c < staleChunks; c += ctas) {
    const size_t off = c * kChunkBytes + size_t(threadIdx.x) * dev::kPackBytes;
    for (int s = 0; s < W; ++s) *reinterpret_cast<dev::Pack*>(slot(rank, stale, s) + off) = empty;
  }
  if (threadIdx.x == 0) {
    state[1 + buf] = nchunks;
    state[0] = (buf + 1) % 3;
  }
}

template <typename T>
fcResult_t launch(const DeviceComm& dc, int channel, const void* in, void* out, size_t count,
                  cudaStream_t stream) {
  constexpr size_t kChunkElems = kChunkBytes / sizeof(T);
  const size_t nchunks = (count + kChunkElems - 1) / kChunkElems;
  // Every CTA that ever ran keeps state; launching the same CTAs for the same count on
  // every rank keeps the per-CTA buffer sequences equal across ranks.
  const unsigned grid = unsigned(nchunks < size_t(dc.maxCtas) ? nchunks : size_t(dc.maxCtas));
  auto kernel = byWorldSize(dc.nranks, [](auto nr) { return allReduceLamportKernel<T, decltype(nr)::value>; });
  return launchKernel(kernel, dim3(grid), dim3(kThreads), stream, dc, channel,
                      static_cast<const T*>(in), static_cast<T*>(out), count);
}

}  // namespace

fcResult_t launchAllReduceLamport(const DeviceComm& dc, int channel, const void* sendbuff,
                                  void* recvbuff, size_t count, fcDataType_t datatype,
                                  cudaStream_t stream) {
  return withElementType(datatype, "Lamport all-reduce", [&](auto tag) {
    return launch<decltype(tag)>(dc, channel, sendbuff, recvbuff, count, stream);
  });
}

}  // namespace fc
