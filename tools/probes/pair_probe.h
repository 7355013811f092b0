// What the pair probes share (engine-pair, mmar-pair: every rank of a communicator in
// one process on one GPU): the exact integer inputs, rounding to the 16-bit types on the
// host, the upload of every rank's operands and the timed replay of their graphs
// together.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fusedcomm.h"
#include "probe_check.h"

namespace pair_probe {

struct Shape {
  size_t M, N, K;
  fcOperation_t transB;
  fcDataType_t t;
};

// Small integers in [-3, 3] from (seed, rank, index): every product and sum is exact.
inline int pattern(uint64_t seed, int rank, size_t i) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull ^ (uint64_t(rank) << 48) ^ i;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return int(x % 7) - 3;
}

// x rounded to nearest-even with the type's significand bits (8: bf16, 11: fp16).
inline float roundTo(fcDataType_t t, float x) {
  if (x == 0.f) return x;
  const int bits = t == fcBfloat16 ? 8 : 11;
  int e = 0;
  const double m = std::frexp(double(x), &e);
  return float(std::ldexp(std::nearbyint(std::ldexp(m, bits)), e - bits));
}

inline uint16_t encode(fcDataType_t t, float x) {  // x exact in the type (normal numbers and zero)
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if (t == fcBfloat16) return uint16_t(u >> 16);
  // fp16: sign, exponent rebiased, 10 mantissa bits (normal numbers and zero only).
  const uint32_t sign = (u >> 16) & 0x8000u;
  if ((u & 0x7fffffffu) == 0) return uint16_t(sign);
  const int exp = int((u >> 23) & 0xff) - 127 + 15;
  return uint16_t(sign | (uint32_t(exp) << 10) | ((u >> 13) & 0x3ffu));
}

inline float decode(fcDataType_t t, uint16_t h) {
  uint32_t u;
  if (t == fcBfloat16) {
    u = uint32_t(h) << 16;
  } else {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return NAN;  // the poison, or an overflow
    u = exp == 0 ? (man == 0 ? sign : 0x7fc00000u) : sign | ((exp - 15 + 127) << 23) | (man << 13);
  }
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Every rank's A [M, K] and B (pattern(seed) and pattern(seed + 1) of each rank).
template <class Rank>
void upload(const Shape& s, uint64_t seed, Rank* ranks, int nranks) {
  for (int r = 0; r < nranks; ++r) {
    std::vector<uint16_t> a(s.M * s.K), b(s.K * s.N);
    for (size_t i = 0; i < a.size(); ++i) a[i] = encode(s.t, float(pattern(seed, r, i)));
    for (size_t i = 0; i < b.size(); ++i) b[i] = encode(s.t, float(pattern(seed + 1, r, i)));
    CK(cudaMemcpy(ranks[r].A, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(ranks[r].B, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  }
}
template <class Rank, size_t W>
void upload(const Shape& s, uint64_t seed, Rank (&ranks)[W]) {
  upload(s, seed, ranks, int(W));
}

// Every rank's graph launched together; ms until the last one ends.
template <class Rank>
float replay(const cudaGraphExec_t* exec, Rank* ranks, int nranks, cudaEvent_t start, const cudaEvent_t* stop) {
  CK(cudaEventRecord(start, ranks[0].stream));
  for (int r = 1; r < nranks; ++r) CK(cudaStreamWaitEvent(ranks[r].stream, start, 0));
  for (int r = 0; r < nranks; ++r) CK(cudaGraphLaunch(exec[r], ranks[r].stream));
  for (int r = 0; r < nranks; ++r) CK(cudaEventRecord(stop[r], ranks[r].stream));
  CK(cudaDeviceSynchronize());
  float most = 0.f;
  for (int r = 0; r < nranks; ++r) {
    float t = 0.f;
    CK(cudaEventElapsedTime(&t, start, stop[r]));
    most = std::max(most, t);
  }
  return most;
}
template <class Rank, size_t W>
float replay(cudaGraphExec_t (&exec)[W], Rank (&ranks)[W], cudaEvent_t start, cudaEvent_t (&stop)[W]) {
  return replay(exec, ranks, int(W), start, stop);
}

}  // namespace pair_probe
