// Reduce-scatter: rank r gets the sum over ranks of block r (recvcount elements)
// of every rank's sendbuff. Pull variant: every rank stages its W blocks into W
// workspace regions (or, zero-copy, leaves them in its symmetric sendbuff), then
// reads block r from every rank in rank-rotated order - the order of Triton-distributed's intra-node reduce-scatter's
// reduction, which starts at offset rank+1 - and sums in fp32. Per pass:
//   copy-in -> barrier e+1 -> reduce -> barrier e+2 (departure)
#include "collectives/chunks.cuh"
#include "collectives/collectives.h"
#include "collectives/dispatch.cuh"
#include "collectives/launch.h"
#include "collectives/regions.h"
#include "core/preload.h"
#include "core/result.h"
#include "device/sync.cuh"

namespace fc {
namespace {

using dev::kChunkBytes;
using dev::kThreads;

template <typename T, int NR>
__global__ void __launch_bounds__(kThreads)
    reduceScatterKernel(DeviceComm dc, int channel, const T* in, T* out, size_t recvcount,
                        size_t regionBytes, SymSource src, bool stage, uint32_t sig) {
  constexpr size_t kChunkElems = kChunkBytes / sizeof(T);
  constexpr int E = dev::PackTraits<T>::kElems;
  const int W = NR > 0 ? NR : dc.nranks;
  const int rank = dc.rank;
  const size_t ctas = size_t(dc.maxCtas);
  const size_t wsOff = channelWorkspaceOffset(dc, channel);
  const size_t regionElems = regionBytes / sizeof(T);
  const size_t regionChunks = regionBytes / kChunkBytes;
  char* myWs = dc.base + size_t(rank) * dc.stride + wsOff;
  const bool vecOut = dev::aligned16(out);

  uint32_t* epochPtr = dev::epochAddr(dc, channel, int(blockIdx.x));
  uint32_t epoch = *epochPtr;
  for (size_t seg0 = 0; seg0 < recvcount; seg0 += regionElems) {
    const size_t n = recvcount - seg0 < regionElems ? recvcount - seg0 : regionElems;
    const size_t segChunks = (n + kChunkElems - 1) / kChunkElems;
    if (stage) {
      for (int s = 0; s < W; ++s) {
        const T* from = in + size_t(s) * recvcount + seg0;
        T* to = reinterpret_cast<T*>(myWs + size_t(s) * regionBytes);
        const bool vec = dev::aligned16(from);
        for (size_t c = dev::firstOwnedChunk(size_t(s) * regionChunks, dc.maxCtas); c < segChunks; c += ctas)
          dev::copyPackIn(from, to, c * kChunkElems, (c + 1) * kChunkElems < n ? (c + 1) * kChunkElems : n, vec);
      }
    }
    if (!dev::barrierBlock(dc, Op::ReduceScatter, sig, channel, ++epoch)) return;
    T* o = out + seg0;
    for (size_t c = dev::firstOwnedChunk(size_t(rank) * regionChunks, dc.maxCtas); c < segChunks; c += ctas) {
      const size_t i = c * kChunkElems + size_t(threadIdx.x) * E;
      if (i >= n) continue;
      const size_t off = stage ? wsOff + size_t(rank) * regionBytes + i * sizeof(T)
                               : src.offset + (size_t(rank) * recvcount + seg0 + i) * sizeof(T);
      dev::storePack(o, i, n, dev::sumPack<T, NR>(src.base, src.stride, off, rank, W), vecOut);
    }
    if (!dev::barrierBlock(dc, Op::ReduceScatter, sig, channel, ++epoch)) return;
  }
  if (threadIdx.x == 0) *epochPtr = epoch;
}

template <typename T>
fcResult_t launch(const DeviceComm& dc, int channel, const void* in, void* out, size_t recvcount,
                  fcDataType_t datatype, const SymSource* symmetricIn, cudaStream_t stream) {
  const RegionPlan plan = planRegions(dc, dc.nranks, recvcount * sizeof(T));
  if (plan.regionBytes == 0)
    return setError(fcInvalidUsage, "reduce-scatter: a workspace of %llu bytes is too small for %d ranks",
                    (unsigned long long)dc.workspaceBytes, dc.nranks);
  auto kernel = byWorldSize(dc.nranks, [](auto nr) { return reduceScatterKernel<T, decltype(nr)::value>; });
  const bool stage = symmetricIn == nullptr;
  const SymSource src = stage ? SymSource{dc.base, dc.stride, 0} : *symmetricIn;
  const uint32_t sig = opSignature(Op::ReduceScatter, uint32_t(datatype), recvcount);
  return launchKernel(kernel, dim3(plan.grid), dim3(kThreads), stream, dc, channel,
                      static_cast<const T*>(in), static_cast<T*>(out), recvcount, plan.regionBytes,
                      src, stage, sig);
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(reduceScatterKernel<float, 2>);

fcResult_t launchReduceScatter(const DeviceComm& dc, int channel, const void* sendbuff,
                               void* recvbuff, size_t recvcount, fcDataType_t datatype,
                               const SymSource* symmetricIn, cudaStream_t stream) {
  return withElementType(datatype, "reduce-scatter", [&](auto tag) {
    return launch<decltype(tag)>(dc, channel, sendbuff, recvbuff, recvcount, datatype, symmetricIn, stream);
  });
}

}  // namespace fc
