// The e4m3 reference of the fp8 outputs' checks (test_allreduce_norm.cc,
// test_matmul_all_reduce.cc).
#pragma once

#include <cmath>
#include <cstdint>

// An e4m3 byte's value (NaN for 0x7f / 0xff).
inline double e4m3(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return std::nan("");
  const double v = e == 0 ? m * 0x1p-9 : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
  return s ? -v : v;
}

// The spacing of e4m3 values around |v| (subnormals: 2^-9).
inline double e4m3Ulp(double v) {
  const double a = std::fabs(v);
  return a < 0x1p-6 ? 0x1p-9 : std::ldexp(1.0, std::ilogb(a) - 3);
}
