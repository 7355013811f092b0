// fc_data.h - test and benchmark data shared by tests/gpu and fc-bench.
//
// Every rank can compute every rank's input without communication: element i of
// rank r for seed s is a small integer in [-8, 8] derived from a hash of (s, r, i).
// Sums of up to 16 such values are exact in fp32, bf16 and fp16, so all-reduce
// results can be compared exactly, whatever the summation order.
#ifndef FC_TOOLS_FC_DATA_H_
#define FC_TOOLS_FC_DATA_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fusedcomm.h"

inline size_t fcTypeSize(fcDataType_t t) { return t == fcFloat32 ? 4 : 2; }

inline const char* fcTypeName(fcDataType_t t) {
  return t == fcFloat32 ? "float" : t == fcFloat16 ? "half" : "bfloat16";
}

inline uint64_t fcSplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The integer input of rank `rank`, element i, for `seed`: in [-8, 8].
inline int fcPatternValue(uint64_t seed, int rank, size_t i) {
  return int(fcSplitMix(seed * 0x100000001b3ull ^ (uint64_t(rank) << 48) ^ i) % 17) - 8;
}

// Store v (already representable) as element i of a `type` array.
inline void fcStore(void* base, fcDataType_t type, size_t i, float v) {
  if (type == fcFloat32) static_cast<float*>(base)[i] = v;
  else if (type == fcFloat16) static_cast<__half*>(base)[i] = __float2half_rn(v);
  else static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
}

inline float fcLoad(const void* base, fcDataType_t type, size_t i) {
  if (type == fcFloat32) return static_cast<const float*>(base)[i];
  if (type == fcFloat16) return __half2float(static_cast<const __half*>(base)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
}

// Host buffer holding rank `rank`'s pattern input.
inline std::vector<char> fcPatternInput(fcDataType_t type, size_t count, uint64_t seed, int rank) {
  std::vector<char> buf(count * fcTypeSize(type));
  for (size_t i = 0; i < count; ++i) fcStore(buf.data(), type, i, float(fcPatternValue(seed, rank, i)));
  return buf;
}

// Max |got[i] - sum over ranks of pattern| over i < count (exact expectation).
// NaN (e.g. an unwritten poisoned element) counts as infinite error.
inline double fcPatternSumError(const void* got, fcDataType_t type, size_t count, uint64_t seed,
                                int nranks) {
  double worst = 0;
  for (size_t i = 0; i < count; ++i) {
    int want = 0;
    for (int r = 0; r < nranks; ++r) want += fcPatternValue(seed, r, i);
    double e = std::fabs(double(fcLoad(got, type, i)) - double(want));
    if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
  }
  return worst;
}

#endif  // FC_TOOLS_FC_DATA_H_
