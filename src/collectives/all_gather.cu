// All-gather: recvbuff = the W ranks' sendbuffs, in rank order. Pull variant:
// every rank stages its sendbuff in its workspace (or, zero-copy, leaves it in its
// symmetric sendbuff); then every rank copies every rank's block into recvbuff,
// rank-rotated so that the ranks do not all read rank 0 first. The loads of one
// chunk from all ranks go out before the first store. Per pass:
//   copy-in -> barrier e+1 -> gather -> barrier e+2 (departure)
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
    allGatherKernel(DeviceComm dc, int channel, const T* in, T* out, size_t sendcount,
                    size_t regionBytes, SymSource src, bool stage, uint32_t sig) {
  constexpr size_t kChunkElems = kChunkBytes / sizeof(T);
  constexpr int E = dev::PackTraits<T>::kElems;
  const int W = NR > 0 ? NR : dc.nranks;
  const int rank = dc.rank;
  const size_t ctas = size_t(dc.maxCtas);
  const size_t wsOff = channelWorkspaceOffset(dc, channel);
  const size_t regionElems = regionBytes / sizeof(T);
  T* myWs = reinterpret_cast<T*>(dc.base + size_t(rank) * dc.stride + wsOff);
  const bool vecIn = dev::aligned16(in);

  uint32_t* epochPtr = dev::epochAddr(dc, channel, int(blockIdx.x));
  uint32_t epoch = *epochPtr;
  for (size_t seg0 = 0; seg0 < sendcount; seg0 += regionElems) {
    const size_t n = sendcount - seg0 < regionElems ? sendcount - seg0 : regionElems;
    const size_t segChunks = (n + kChunkElems - 1) / kChunkElems;
    if (stage)
      for (size_t c = blockIdx.x; c < segChunks; c += ctas)
        dev::copyPackIn(in + seg0, myWs, c * kChunkElems, (c + 1) * kChunkElems < n ? (c + 1) * kChunkElems : n, vecIn);
    if (!dev::barrierBlock(dc, Op::AllGather, sig, channel, ++epoch)) return;
    const size_t base = stage ? wsOff : src.offset + seg0 * sizeof(T);
    for (size_t c = blockIdx.x; c < segChunks; c += ctas) {
      const size_t i = c * kChunkElems + size_t(threadIdx.x) * E;
      if (i >= n) continue;
      const size_t off = base + i * sizeof(T);
      if constexpr (NR > 0) {
        dev::Pack v[NR];
#pragma unroll
        for (int j = 0; j < NR; ++j)
          v[j] = *reinterpret_cast<const dev::Pack*>(src.base + size_t((rank + j) % NR) * src.stride + off);
#pragma unroll
        for (int j = 0; j < NR; ++j) {
          T* o = out + size_t((rank + j) % NR) * sendcount + seg0;
          dev::storePack(o, i, n, v[j], dev::aligned16(o));
        }
      } else {
        for (int j = 0; j < W; ++j) {
          const int p = (rank + j) % W;
          T* o = out + size_t(p) * sendcount + seg0;
          dev::storePack(o, i, n, *reinterpret_cast<const dev::Pack*>(src.base + size_t(p) * src.stride + off),
                         dev::aligned16(o));
        }
      }
    }
    if (!dev::barrierBlock(dc, Op::AllGather, sig, channel, ++epoch)) return;
  }
  if (threadIdx.x == 0) *epochPtr = epoch;
}

template <typename T>
fcResult_t launch(const DeviceComm& dc, int channel, const void* in, void* out, size_t sendcount,
                  fcDataType_t datatype, const SymSource* symmetricIn, cudaStream_t stream) {
  const RegionPlan plan = planRegions(dc, 1, sendcount * sizeof(T));
  if (plan.regionBytes == 0)
    return setError(fcInvalidUsage, "all-gather: the workspace is smaller than one chunk");
  auto kernel = byWorldSize(dc.nranks, [](auto nr) { return allGatherKernel<T, decltype(nr)::value>; });
  const bool stage = symmetricIn == nullptr;
  const SymSource src = stage ? SymSource{dc.base, dc.stride, 0} : *symmetricIn;
  const uint32_t sig = opSignature(Op::AllGather, uint32_t(datatype), sendcount);
  return launchKernel(kernel, dim3(plan.grid), dim3(kThreads), stream, dc, channel,
                      static_cast<const T*>(in), static_cast<T*>(out), sendcount, plan.regionBytes,
                      src, stage, sig);
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(allGatherKernel<float, 2>);

fcResult_t launchAllGather(const DeviceComm& dc, int channel, const void* sendbuff, void* recvbuff,
                           size_t sendcount, fcDataType_t datatype, const SymSource* symmetricIn,
                           cudaStream_t stream) {
  return withElementType(datatype, "all-gather", [&](auto tag) {
    return launch<decltype(tag)>(dc, channel, sendbuff, recvbuff, sendcount, datatype, symmetricIn, stream);
  });
}

}  // namespace fc
