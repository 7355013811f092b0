// Building blocks of the collective kernels: 8 KiB chunks moved by 512 threads as
// one 16-byte pack each, and the ownership rule that lets per-CTA barriers stand in
// for grid-wide ones.
//
// Ownership rule (every op, every rank, every call): workspace chunk g - the 8 KiB
// at workspace offset g * kChunkBytes - is written and read only by CTA
// g % maxCtas. A CTA's departure barrier therefore proves that every peer has
// finished with every workspace byte that this CTA will overwrite next, whatever
// the next op and its size. Ops that split the workspace into regions iterate, in
// each region, exactly the chunks their CTA owns (firstOwnedChunk).
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/device_comm.h"
#include "device/pack.cuh"

namespace fc::dev {

constexpr int kThreads = 512;
constexpr size_t kChunkBytes = size_t(kThreads) * kPackBytes;

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// The first region-relative chunk this CTA owns in a region that starts at
// workspace chunk `regionChunk0`; the next ones follow every maxCtas chunks.
__device__ __forceinline__ size_t firstOwnedChunk(size_t regionChunk0, int maxCtas) {
  const size_t m = size_t(maxCtas);
  return (size_t(blockIdx.x) + m - regionChunk0 % m) % m;
}

// Copy elements [first, last) of `in` to `ws` (16-byte aligned, same indexing): this
// thread's pack of the chunk starting at `first`.
template <typename T>
__device__ __forceinline__ void copyPackIn(const T* in, T* ws, size_t first, size_t last, bool vec) {
  constexpr int E = PackTraits<T>::kElems;
  const size_t i = first + size_t(threadIdx.x) * E;
  if (i >= last) return;
  if (vec && i + E <= last) {
    *reinterpret_cast<Pack*>(ws + i) = *reinterpret_cast<const Pack*>(in + i);
  } else {
    for (size_t k = i; k < i + E && k < last; ++k) ws[k] = in[k];
  }
}

// Store the elements of pack p that fall in [i, last) at out + i.
template <typename T>
__device__ __forceinline__ void storePack(T* out, size_t i, size_t last, const Pack& p, bool vec) {
  constexpr int E = PackTraits<T>::kElems;
  if (vec && i + E <= last) {
    *reinterpret_cast<Pack*>(out + i) = p;
  } else {
    const T* e = reinterpret_cast<const T*>(&p);
    for (int k = 0; k < E && i + k < last; ++k) out[i + k] = e[k];
  }
}

// acc += the packs of ranks 0, 1, ..., NR-1 in that order, where v[j] holds rank
// (first + j) % NR's. Loads go out rank-rotated (so that ranks do not all hit rank 0
// first), but fp32 addition is not associative: adding in one fixed order makes
// every rank that sums the same packs (the one-shots) get the same bits.
template <typename T, int NR>
__device__ __forceinline__ void accumulateInRankOrder(float (&acc)[PackTraits<T>::kElems],
                                                      const Pack (&v)[NR], int first) {
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    const int j = (r - first + NR) % NR;
    Pack x = v[0];
#pragma unroll
    for (int t = 1; t < NR; ++t)
      if (t == j) x = v[t];  // selects, not a dynamically indexed (local-memory) array
    accumulate<T>(acc, x);
  }
}

// The sum over all ranks of the pack at byte offset `off` of each rank's copy of a
// symmetric buffer (base + r*stride + off), in fp32 in rank order, rounded once to T.
// Loads go out rank-rotated (starting with our own) and all before the first add
// (NR > 0).
template <typename T, int NR>
__device__ __forceinline__ Pack sumPack(const char* base, uint64_t stride, size_t off, int rank,
                                        int nranks) {
  constexpr int E = PackTraits<T>::kElems;
  float acc[E];
#pragma unroll
  for (int k = 0; k < E; ++k) acc[k] = 0.f;
  if constexpr (NR > 0) {
    Pack v[NR];
#pragma unroll
    for (int j = 0; j < NR; ++j) {
      const int r = (rank + j) % NR;
      v[j] = *reinterpret_cast<const Pack*>(base + size_t(r) * stride + off);
    }
    accumulateInRankOrder<T, NR>(acc, v, rank);
  } else {
    for (int r = 0; r < nranks; ++r)
      accumulate<T>(acc, *reinterpret_cast<const Pack*>(base + size_t(r) * stride + off));
  }
  return toPack<T>(acc);
}

}  // namespace fc::dev
