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
#include "collectives/lamport.cuh"
#include "collectives/launch.h"
#include "core/result.h"

namespace fc {
namespace {

using dev::kChunkBytes;
using dev::kThreads;

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
  dev::LamportRun run(dc, channel);

  // 1. Push our packs into our slot of every rank's current buffer (set 0).
  for (size_t c = blockIdx.x; c < nchunks; c += ctas) {
    const size_t i = c * kChunkElems + size_t(threadIdx.x) * E;
    if (i >= count) continue;
    const dev::Pack v = dev::notEmpty(dev::loadInputPack(in, i, count, vecIn));
    const size_t off = i * sizeof(T);
#pragma unroll 8
    for (int j = 0; j < W; ++j) {
      const int r = (rank + j) % W;
      *reinterpret_cast<dev::Pack*>(run.slot(r, run.buf, 0, rank) + off) = v;
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
        p[j] = reinterpret_cast<const dev::Pack*>(run.slot(rank, run.buf, 0, (rank + j) % NR) + off);
        v[j] = dev::loadVolatilePack(p[j]);
      }
      if (!dev::pollPacks<NR>(dc, Op::AllReduceOneShot, channel, run.buf, p, v,
                              [&](int j) { return (rank + j) % NR; })) {
        failed = 1;
        break;
      }
#pragma unroll
      for (int j = 0; j < NR; ++j) dev::accumulate<T>(acc, v[j]);
    } else {
      for (int j = 0; j < W && !failed; ++j) {
        const int s = (rank + j) % W;
        const dev::Pack* p = reinterpret_cast<const dev::Pack*>(run.slot(rank, run.buf, 0, s) + off);
        dev::Pack v = dev::loadVolatilePack(p);
        failed = !dev::pollPack(dc, Op::AllReduceOneShot, channel, run.buf, p, v, s);
        dev::accumulate<T>(acc, v);
      }
    }
    if (!failed) dev::storePack(out, i, count, dev::toPack<T>(acc), vecOut);
  }
  if (__syncthreads_or(failed)) return;

  // 3. Reset the buffer of our previous run for the run after next; then advance.
  run.resetStale();
  run.advance(nchunks | dev::kOwnSlotUsed, 0);
  if (threadIdx.x == 0) run.save();
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
