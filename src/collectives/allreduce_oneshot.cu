// One-shot all-reduce (PyTorch symmetric memory's one_shot_all_reduce).
//
//   1. copy-in: each CTA copies its chunks of sendbuff into this rank's workspace
//      (skipped when sendbuff is itself symmetric memory: peers then read it there);
//   2. barrier: the same CTA on every rank meets at epoch e+1 (signal pads);
//   3. reduce: each CTA reads its chunks from every rank with 16-byte loads, in
//      rank-rotated order (rank r starts with itself, then r+1, ...: the ranks do
//      not all hammer rank 0's memory at once), sums in fp32, stores once;
//   4. departure barrier at e+2: no rank refills its workspace (next call) while a
//      peer still reads it.
// Workspace chunk c is CTA c % maxCtas's (chunks.cuh: the ownership rule).
#include "collectives/chunks.cuh"
#include "collectives/collectives.h"
#include "collectives/dispatch.cuh"
#include "collectives/launch.h"
#include "core/preload.h"
#include "core/result.h"
#include "device/sync.cuh"

namespace fc {
namespace {

using dev::kChunkBytes;
using dev::kThreads;

// `src` says where every rank's input is read: the workspace of `channel` after a
// copy-in (stage), or the caller's symmetric sendbuff (base + r*stride + offset).
template <typename T, int NR>
__global__ void __launch_bounds__(kThreads) allReduceOneShotKernel(DeviceComm dc, int channel,
                                                                   const T* in, T* out,
                                                                   size_t count, SymSource src,
                                                                   bool stage, uint32_t sig) {
  constexpr size_t kChunkElems = kChunkBytes / sizeof(T);
  const size_t nchunks = (count + kChunkElems - 1) / kChunkElems;
  const bool vecIn = dev::aligned16(in), vecOut = dev::aligned16(out);
  const size_t ctas = size_t(dc.maxCtas);

  if (stage) {
    T* ws = reinterpret_cast<T*>(dc.base + size_t(dc.rank) * dc.stride + src.offset);
    for (size_t c = blockIdx.x; c < nchunks; c += ctas) {
      const size_t first = c * kChunkElems;
      dev::copyPackIn(in, ws, first, first + kChunkElems < count ? first + kChunkElems : count, vecIn);
    }
  }

  uint32_t* epochPtr = dev::epochAddr(dc, channel, int(blockIdx.x));
  const uint32_t epoch = *epochPtr;  // written only by this CTA, at the end of the previous call
  if (!dev::barrierBlock(dc, opOf(sig), sig, channel, epoch + 1)) return;

  for (size_t c = blockIdx.x; c < nchunks; c += ctas) {
    const size_t first = c * kChunkElems;
    const size_t last = first + kChunkElems < count ? first + kChunkElems : count;
    const size_t i = first + size_t(threadIdx.x) * dev::PackTraits<T>::kElems;
    if (i < last)
      dev::storePack(out, i, last,
                     dev::sumPack<T, NR>(src.base, src.stride, src.offset + i * sizeof(T), dc.rank,
                                         dc.nranks),
                     vecOut);
  }

  if (!dev::barrierBlock(dc, opOf(sig), sig, channel, epoch + 2)) return;
  if (threadIdx.x == 0) *epochPtr = epoch + 2;  // read by this CTA's next launch (stream order)
}

template <typename T>
fcResult_t launch(const DeviceComm& dc, int channel, const void* in, void* out, size_t count,
                  fcDataType_t datatype, const SymSource* symmetricIn, cudaStream_t stream, uint32_t callerSig) {
  constexpr size_t kChunkElems = kChunkBytes / sizeof(T);
  const size_t nchunks = (count + kChunkElems - 1) / kChunkElems;
  const unsigned grid = unsigned(nchunks < size_t(dc.maxCtas) ? nchunks : size_t(dc.maxCtas));
  auto kernel = byWorldSize(dc.nranks, [](auto nr) { return allReduceOneShotKernel<T, decltype(nr)::value>; });
  const bool stage = symmetricIn == nullptr;
  const SymSource src = stage ? SymSource{dc.base, dc.stride, channelWorkspaceOffset(dc, channel)} : *symmetricIn;
  const uint32_t sig = callerSig != 0 ? callerSig : opSignature(Op::AllReduceOneShot, uint32_t(datatype), count);
  return launchKernel(kernel, dim3(grid), dim3(kThreads), stream, dc, channel,
                      static_cast<const T*>(in), static_cast<T*>(out), count, src, stage, sig);
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(allReduceOneShotKernel<float, 2>);

size_t allReduceOneShotWorkspace(size_t bytes) { return (bytes + 15) / 16 * 16; }

fcResult_t launchAllReduceOneShot(const DeviceComm& dc, int channel, const void* sendbuff,
                                  void* recvbuff, size_t count, fcDataType_t datatype,
                                  const SymSource* symmetricIn, cudaStream_t stream, uint32_t sig) {
  return withElementType(datatype, "one-shot all-reduce", [&](auto tag) {
    return launch<decltype(tag)>(dc, channel, sendbuff, recvbuff, count, datatype, symmetricIn, stream, sig);
  });
}

}  // namespace fc
