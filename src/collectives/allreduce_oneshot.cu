// One-shot all-reduce (seed 004; PyTorch symmetric memory's one_shot_all_reduce).
//
//   1. copy-in: each CTA copies its chunks of sendbuff into this rank's workspace
//      (skipped when sendbuff is itself symmetric memory: peers then read it there);
//   2. barrier: the same CTA on every rank meets at epoch e+1 (signal pads);
//   3. reduce: each CTA reads its chunks from every rank's workspace with 16-byte
//      loads, in rank-rotated order (rank r starts with itself, then r+1, ...: the
//      ranks do not all hammer rank 0's memory at once), sums in fp32, stores once;
//   4. departure barrier at e+2: no rank refills its workspace (next call) while a
//      peer still reads it.
//
// Ownership invariant that makes per-CTA barriers enough: workspace byte x always
// belongs to CTA (x / kChunkBytes) % dc.maxCtas, whatever the count (maxCtas is fixed
// per communicator), so the CTA that waited for every peer's departure from x in
// the last call that used it is the one that overwrites x next.
#include "collectives/collectives.h"
#include "collectives/launch.h"
#include "core/result.h"
#include "device/pack.cuh"
#include "device/sync.cuh"

namespace fc {
namespace {

constexpr int kThreads = 512;
constexpr size_t kChunkBytes = size_t(kThreads) * dev::kPackBytes;  // one pack per thread

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// Copy elements [first, last) of `in` to `ws` (16-byte aligned) in packs when possible.
template <typename T>
__device__ __forceinline__ void copyIn(const T* in, T* ws, size_t first, size_t last, bool vec) {
  constexpr int E = dev::PackTraits<T>::kElems;
  const size_t i = first + size_t(threadIdx.x) * E;  // this thread's pack
  if (i >= last) return;
  if (vec && i + E <= last) {
    *reinterpret_cast<dev::Pack*>(ws + i) = *reinterpret_cast<const dev::Pack*>(in + i);
  } else {
    for (size_t k = i; k < i + E && k < last; ++k) ws[k] = in[k];
  }
}

// Sum pack i over all ranks' sources and store elements [i, min(i+E, last)).
template <typename T, int NR>
__device__ __forceinline__ void reducePack(const DeviceComm& dc, const SymSource& src, T* out,
                                           size_t i, size_t last, bool vec) {
  constexpr int E = dev::PackTraits<T>::kElems;
  const int nranks = NR > 0 ? NR : dc.nranks;
  float acc[E];
#pragma unroll
  for (int k = 0; k < E; ++k) acc[k] = 0.f;
  const size_t off = src.offset + i * sizeof(T);
  if constexpr (NR > 0) {
    // All loads in flight before the first add: NR independent 16-byte NVLink reads.
    dev::Pack v[NR];
#pragma unroll
    for (int j = 0; j < NR; ++j) {
      const int r = (dc.rank + j) % NR;
      v[j] = *reinterpret_cast<const dev::Pack*>(src.base + size_t(r) * src.stride + off);
    }
#pragma unroll
    for (int j = 0; j < NR; ++j) dev::accumulate<T>(acc, v[j]);
  } else {
    for (int j = 0; j < nranks; ++j) {
      const int r = (dc.rank + j) % nranks;
      dev::accumulate<T>(acc, *reinterpret_cast<const dev::Pack*>(src.base + size_t(r) * src.stride + off));
    }
  }
  const dev::Pack p = dev::toPack<T>(acc);
  if (vec && i + E <= last) {
    *reinterpret_cast<dev::Pack*>(out + i) = p;
  } else {
    const T* e = reinterpret_cast<const T*>(&p);
    for (int k = 0; k < E && i + k < last; ++k) out[i + k] = e[k];
  }
}

// `src` says where every rank's input is read: the workspace of `channel` after a
// copy-in (stage), or the caller's symmetric sendbuff (base + r*stride + offset).
template <typename T, int NR>
__global__ void __launch_bounds__(kThreads) allReduceOneShotKernel(DeviceComm dc, int channel,
                                                                   const T* in, T* out,
                                                                   size_t count, SymSource src,
                                                                   bool stage, uint32_t sig) {
  constexpr size_t kChunkElems = kChunkBytes / sizeof(T);
  const size_t nchunks = (count + kChunkElems - 1) / kChunkElems;
  const bool vecIn = aligned16(in), vecOut = aligned16(out);
  const size_t ctas = size_t(dc.maxCtas);

  if (stage) {
    T* ws = reinterpret_cast<T*>(dc.base + size_t(dc.rank) * dc.stride + src.offset);
    for (size_t c = blockIdx.x; c < nchunks; c += ctas) {
      const size_t first = c * kChunkElems;
      const size_t last = first + kChunkElems < count ? first + kChunkElems : count;
      copyIn(in, ws, first, last, vecIn);
    }
  }

  uint32_t* epochPtr = dev::epochAddr(dc, channel, int(blockIdx.x));
  const uint32_t epoch = *epochPtr;  // written only by this CTA, at the end of the previous call
  if (!dev::barrierBlock(dc, Op::AllReduceOneShot, sig, channel, epoch + 1)) return;

  for (size_t c = blockIdx.x; c < nchunks; c += ctas) {
    const size_t first = c * kChunkElems;
    const size_t last = first + kChunkElems < count ? first + kChunkElems : count;
    const size_t i = first + size_t(threadIdx.x) * dev::PackTraits<T>::kElems;
    if (i < last) reducePack<T, NR>(dc, src, out, i, last, vecOut);
  }

  if (!dev::barrierBlock(dc, Op::AllReduceOneShot, sig, channel, epoch + 2)) return;
  if (threadIdx.x == 0) *epochPtr = epoch + 2;  // read by this CTA's next launch (stream order)
}

template <typename T>
fcResult_t launch(const DeviceComm& dc, int channel, const void* in, void* out, size_t count,
                  fcDataType_t datatype, const SymSource* symmetricIn, cudaStream_t stream) {
  constexpr size_t kChunkElems = kChunkBytes / sizeof(T);
  const size_t nchunks = (count + kChunkElems - 1) / kChunkElems;
  const unsigned grid = unsigned(nchunks < size_t(dc.maxCtas) ? nchunks : size_t(dc.maxCtas));
  const T* i = static_cast<const T*>(in);
  T* o = static_cast<T*>(out);
  auto kernel = dc.nranks == 2   ? allReduceOneShotKernel<T, 2>
                : dc.nranks == 4 ? allReduceOneShotKernel<T, 4>
                : dc.nranks == 8 ? allReduceOneShotKernel<T, 8>
                                 : allReduceOneShotKernel<T, 0>;
  const bool stage = symmetricIn == nullptr;
  const SymSource src = stage ? SymSource{dc.base, dc.stride,
                                          kSignalBytes + size_t(channel) * dc.workspaceBytes}
                              : *symmetricIn;
  const uint32_t sig = opSignature(Op::AllReduceOneShot, uint32_t(datatype), count);
  return launchKernel(kernel, dim3(grid), dim3(kThreads), stream, dc, channel, i, o, count, src,
                      stage, sig);
}

}  // namespace

size_t allReduceOneShotWorkspace(size_t bytes) { return (bytes + 15) / 16 * 16; }

fcResult_t launchAllReduceOneShot(const DeviceComm& dc, int channel, const void* sendbuff,
                                  void* recvbuff, size_t count, fcDataType_t datatype,
                                  const SymSource* symmetricIn, cudaStream_t stream) {
  switch (datatype) {
    case fcFloat32:
      return launch<float>(dc, channel, sendbuff, recvbuff, count, datatype, symmetricIn, stream);
    case fcFloat16:
      return launch<__half>(dc, channel, sendbuff, recvbuff, count, datatype, symmetricIn, stream);
    case fcBfloat16:
      return launch<__nv_bfloat16>(dc, channel, sendbuff, recvbuff, count, datatype, symmetricIn,
                                   stream);
  }
  return setError(fcInternalError, "one-shot all-reduce: datatype %d", int(datatype));
}

}  // namespace fc
