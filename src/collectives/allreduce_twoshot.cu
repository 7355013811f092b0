// Two-shot all-reduce: a reduce-scatter then an all-gather, each rank reducing and
// publishing 1/W of the data, so each rank moves 2(W-1)/W of the buffer over NVLink
// instead of the one-shot's W-1 times it.
//
// The input is cut into W slices of `slice` elements (a whole number of packs);
// slice s is staged into workspace region s. Per pass (one region's worth of each
// slice):
//   1. copy-in: every slice's segment into its region      -> barrier e+1
//   2. reduce: this rank's slice r, read from region r of every rank, summed in
//      fp32, rounded once, stored to recvbuff and back into our region r -> e+2
//   3. gather: every peer p's reduced slice from its region p -> recvbuff -> e+3
// Zero-copy (symmetric sendbuff): step 1 is skipped and step 2 reads the peers'
// sendbuff directly; the reduced slices still go through the workspace.
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
    allReduceTwoShotKernel(DeviceComm dc, int channel, const T* in, T* out, size_t count, size_t slice,
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
  // Elements of slice s that exist: [s*slice, min((s+1)*slice, count)).
  auto sliceLen = [&](int s) -> size_t {
    const size_t begin = size_t(s) * slice;
    return begin >= count ? 0 : (count - begin < slice ? count - begin : slice);
  };

  uint32_t* epochPtr = dev::epochAddr(dc, channel, int(blockIdx.x));
  uint32_t epoch = *epochPtr;
  for (size_t seg0 = 0; seg0 < slice; seg0 += regionElems) {
    const size_t segLen = slice - seg0 < regionElems ? slice - seg0 : regionElems;
    const size_t segChunks = (segLen + kChunkElems - 1) / kChunkElems;
    // Valid elements of slice s in this segment: [0, validLen(s)).
    auto validLen = [&](int s) -> size_t {
      const size_t n = sliceLen(s);
      return n <= seg0 ? 0 : (n - seg0 < segLen ? n - seg0 : segLen);
    };

    if (stage) {
      for (int s = 0; s < W; ++s) {
        const T* from = in + size_t(s) * slice + seg0;
        T* to = reinterpret_cast<T*>(myWs + size_t(s) * regionBytes);
        const size_t n = validLen(s);
        const bool vec = dev::aligned16(from);
        for (size_t c = dev::firstOwnedChunk(size_t(s) * regionChunks, dc.maxCtas); c < segChunks; c += ctas)
          if (c * kChunkElems < n)
            dev::copyPackIn(from, to, c * kChunkElems, (c + 1) * kChunkElems < n ? (c + 1) * kChunkElems : n, vec);
      }
    }
    if (!dev::barrierBlock(dc, opOf(sig), sig, channel, ++epoch)) return;

    {  // reduce our slice
      const size_t n = validLen(rank);
      T* to = reinterpret_cast<T*>(myWs + size_t(rank) * regionBytes);
      T* o = out + size_t(rank) * slice + seg0;
      for (size_t c = dev::firstOwnedChunk(size_t(rank) * regionChunks, dc.maxCtas); c < segChunks; c += ctas) {
        const size_t i = c * kChunkElems + size_t(threadIdx.x) * E;
        if (i >= n) continue;
        const size_t off = stage ? wsOff + size_t(rank) * regionBytes + i * sizeof(T)
                                 : src.offset + (size_t(rank) * slice + seg0 + i) * sizeof(T);
        const dev::Pack p = dev::sumPack<T, NR>(src.base, src.stride, off, rank, W);
        *reinterpret_cast<dev::Pack*>(to + i) = p;  // published for the peers' gather
        dev::storePack(o, i, n, p, vecOut);
      }
    }
    if (!dev::barrierBlock(dc, opOf(sig), sig, channel, ++epoch)) return;

    for (int j = 1; j < W; ++j) {  // gather the peers' slices, rank-rotated
      const int p = (rank + j) % W;
      const size_t n = validLen(p);
      const T* from = reinterpret_cast<const T*>(dc.base + size_t(p) * dc.stride + wsOff +
                                                 size_t(p) * regionBytes);
      T* o = out + size_t(p) * slice + seg0;
      for (size_t c = dev::firstOwnedChunk(size_t(p) * regionChunks, dc.maxCtas); c < segChunks; c += ctas) {
        const size_t i = c * kChunkElems + size_t(threadIdx.x) * E;
        if (i < n) dev::storePack(o, i, n, *reinterpret_cast<const dev::Pack*>(from + i), vecOut);
      }
    }
    if (!dev::barrierBlock(dc, opOf(sig), sig, channel, ++epoch)) return;
  }
  if (threadIdx.x == 0) *epochPtr = epoch;
}

template <typename T>
fcResult_t launch(const DeviceComm& dc, int channel, const void* in, void* out, size_t count,
                  fcDataType_t datatype, const SymSource* symmetricIn, cudaStream_t stream, uint32_t callerSig) {
  constexpr size_t E = dev::PackTraits<T>::kElems;
  const size_t W = size_t(dc.nranks);
  const size_t slice = ((count + W - 1) / W + E - 1) / E * E;
  const RegionPlan plan = planRegions(dc, dc.nranks, slice * sizeof(T));
  if (plan.regionBytes == 0)
    return setError(fcInvalidUsage, "two-shot all-reduce: a workspace of %llu bytes is too small for "
                    "%d ranks (need %zu)", (unsigned long long)dc.workspaceBytes, dc.nranks,
                    W * kChunkBytes);
  auto kernel = byWorldSize(dc.nranks, [](auto nr) { return allReduceTwoShotKernel<T, decltype(nr)::value>; });
  const bool stage = symmetricIn == nullptr;
  const SymSource src = stage ? SymSource{dc.base, dc.stride, 0} : *symmetricIn;
  const uint32_t sig = callerSig != 0 ? callerSig : opSignature(Op::AllReduceTwoShot, uint32_t(datatype), count);
  return launchKernel(kernel, dim3(plan.grid), dim3(kThreads), stream, dc, channel,
                      static_cast<const T*>(in), static_cast<T*>(out), count, slice,
                      plan.regionBytes, src, stage, sig);
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(allReduceTwoShotKernel<float, 2>);

fcResult_t launchAllReduceTwoShot(const DeviceComm& dc, int channel, const void* sendbuff,
                                  void* recvbuff, size_t count, fcDataType_t datatype,
                                  const SymSource* symmetricIn, cudaStream_t stream, uint32_t sig) {
  return withElementType(datatype, "two-shot all-reduce", [&](auto tag) {
    return launch<decltype(tag)>(dc, channel, sendbuff, recvbuff, count, datatype, symmetricIn, stream, sig);
  });
}

}  // namespace fc
