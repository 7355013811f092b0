// Copy-engine reduce-scatter (after Triton-distributed's intra-node reduce-scatter). Per pass p of up to passElems elements per
// block, in workspace slot p % S (S = ce::kSlots):
//
//   pushes(p): on the copy queue, at time t = 1..W-1 rank r sends its block d = r+t
//              (Triton-distributed's swizzle: at each time every rank sends to a different
//              rank) into slot p of rank d, at index (r - d - 1) mod W, so that
//              index k of a slot holds the block from rank d+1+k;
//   barrier p: on the caller's stream, after waiting for our pushes(p): every
//              rank's pushes(p) have landed, so every slot p is full;
//   reduce(p): local SM kernel, indices 0..W-2 then our own block (Triton-distributed's order:
//              rank+1, rank+2, ...), summed in fp32, rounded once.
//
// The copy queue runs S-1 passes ahead: pushes(p+S-1) wait only for barrier p. They
// overwrite slot (p-1) % S, last read by reduce(p-1), and every rank enqueued
// reduce(p-1) before its barrier p, so passing barrier p proves all of them
// finished. An entry barrier does the same for whatever used the workspaces before
// this call; nothing is left in flight at the end (the last pushes precede the
// last barrier, the last reduce reads only our own workspace).
#include <algorithm>

#include "collectives/chunks.cuh"
#include "collectives/collectives.h"
#include "collectives/copy_engine.h"
#include "collectives/dispatch.cuh"
#include "collectives/launch.h"
#include "core/datatype.h"
#include "core/preload.h"
#include "core/result.h"

namespace fc {
namespace {

using dev::kThreads;

// out[i] = blocks[0][i] + ... + blocks[W-2][i] + own[i], blocks `blockElems` apart.
template <typename T, int NR>
__global__ void __launch_bounds__(kThreads)
    localReduceKernel(const T* blocks, size_t blockElems, const T* own, T* out, size_t n, int nranks) {
  constexpr int E = dev::PackTraits<T>::kElems;
  const int W = NR > 0 ? NR : nranks;
  const bool vec = dev::aligned16(own) && dev::aligned16(out);  // blocks: aligned by construction
  const size_t step = size_t(gridDim.x) * kThreads * E;
  for (size_t i = (size_t(blockIdx.x) * kThreads + threadIdx.x) * E; i < n; i += step) {
    float acc[E];
#pragma unroll
    for (int k = 0; k < E; ++k) acc[k] = 0.f;
    if (vec && i + E <= n) {
      if constexpr (NR > 0) {
        dev::Pack v[NR];  // all loads in flight before the first add
#pragma unroll
        for (int j = 0; j < NR - 1; ++j) v[j] = *reinterpret_cast<const dev::Pack*>(blocks + j * blockElems + i);
        v[NR - 1] = *reinterpret_cast<const dev::Pack*>(own + i);
#pragma unroll
        for (int j = 0; j < NR; ++j) dev::accumulate<T>(acc, v[j]);
      } else {
        for (int j = 0; j < W - 1; ++j)
          dev::accumulate<T>(acc, *reinterpret_cast<const dev::Pack*>(blocks + j * blockElems + i));
        dev::accumulate<T>(acc, *reinterpret_cast<const dev::Pack*>(own + i));
      }
      *reinterpret_cast<dev::Pack*>(out + i) = dev::toPack<T>(acc);
    } else {
      for (size_t e = i; e < i + E && e < n; ++e) {
        float a = 0.f;
        for (int j = 0; j < W - 1; ++j) a += dev::toFloat(blocks[j * blockElems + e]);
        out[e] = dev::fromFloat<T>(a + dev::toFloat(own[e]));
      }
    }
  }
}

template <typename T>
fcResult_t launchLocalReduce(int nranks, const void* blocks, size_t blockElems, const void* own, void* out,
                             size_t n, cudaStream_t stream) {
  auto kernel = byWorldSize(nranks, [](auto nr) { return localReduceKernel<T, decltype(nr)::value>; });
  // Bandwidth-bound: two 512-thread CTAs per SM of an H100/H200 (132 SMs) keep
  // enough 16-byte loads in flight; more CTAs only add scheduling.
  const size_t packs = (n + dev::PackTraits<T>::kElems - 1) / dev::PackTraits<T>::kElems;
  const unsigned grid = unsigned(std::min<size_t>((packs + kThreads - 1) / kThreads, 264));
  return launchKernel(kernel, dim3(grid), dim3(kThreads), stream, static_cast<const T*>(blocks),
                      blockElems, static_cast<const T*>(own), static_cast<T*>(out), n, nranks);
}

fcResult_t localReduce(fcDataType_t dt, int nranks, const void* blocks, size_t blockElems, const void* own,
                       void* out, size_t n, cudaStream_t stream) {
  return withElementType(dt, "reduce-scatter", [&](auto tag) {
    return launchLocalReduce<decltype(tag)>(nranks, blocks, blockElems, own, out, n, stream);
  });
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(localReduceKernel<float, 2>);

fcResult_t launchReduceScatterCe(const DeviceComm& dc, int channel, CopyQueue& copies,
                                 const void* sendbuff, void* recvbuff, size_t recvcount,
                                 fcDataType_t datatype, cudaStream_t stream) {
  const int W = dc.nranks, rank = dc.rank;
  const size_t es = dataTypeSize(datatype);
  // A slot holds W-1 blocks (our own block is read where it is).
  const size_t passBytes = W > 1 ? ce::slotBytes(dc) / size_t(W - 1) / 256 * 256 : 0;
  if (passBytes == 0)
    return setError(fcInvalidUsage, "reduce-scatter: a workspace of %llu bytes is too small for %d ranks",
                    (unsigned long long)dc.workspaceBytes, W);
  const size_t passElems = passBytes / es;
  const size_t passes = (recvcount + passElems - 1) / passElems;
  const uint32_t sig = opSignature(Op::ReduceScatterCe, uint32_t(datatype), recvcount);
  const char* send = static_cast<const char*>(sendbuff);
  char* recv = static_cast<char*>(recvbuff);

  auto pushes = [&](size_t p) -> fcResult_t {
    const size_t seg0 = p * passElems, n = std::min(passElems, recvcount - seg0);
    for (int t = 1; t < W; ++t) {
      const int d = (rank + t) % W;
      const int k = (rank - d - 1 + 2 * W) % W;
      FC_CHECK(ce::copy(ce::slot(dc, d, channel, p) + size_t(k) * passBytes,
                        send + (size_t(d) * recvcount + seg0) * es, n * es, copies.stream()));
    }
    return copies.mark(p);
  };

  FC_CHECK(launchOpBarrier(dc, channel, Op::ReduceScatterCe, sig, stream));
  FC_CHECK(copies.after(stream, 0));
  constexpr size_t S = ce::kSlots;
  for (size_t p = 0; p < passes && p + 1 < S; ++p) FC_CHECK(pushes(p));
  for (size_t p = 0; p < passes; ++p) {
    const size_t seg0 = p * passElems, n = std::min(passElems, recvcount - seg0);
    FC_CHECK(copies.waitMark(stream, p));
    FC_CHECK(launchOpBarrier(dc, channel, Op::ReduceScatterCe, sig, stream));
    if (p + S - 1 < passes) {
      FC_CHECK(copies.after(stream, p));
      FC_CHECK(pushes(p + S - 1));
    }
    FC_CHECK(localReduce(datatype, W, ce::slot(dc, rank, channel, p), passElems,
                         send + (size_t(rank) * recvcount + seg0) * es, recv + seg0 * es, n, stream));
  }
  return fcSuccess;
}

}  // namespace fc
