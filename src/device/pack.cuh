// 16-byte packs: the unit of every vectorised load/store (LDG.128/STG.128), and
// their conversion to and from fp32 for accumulation.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace fc::dev {

using Pack = uint4;
constexpr int kPackBytes = 16;

template <typename T>
struct PackTraits {
  static constexpr int kElems = kPackBytes / int(sizeof(T));
};

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) { return v; }
template <> __device__ __forceinline__ __half fromFloat<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// acc[i] += element i of pack p (interpreted as T).
template <typename T>
__device__ __forceinline__ void accumulate(float (&acc)[PackTraits<T>::kElems], const Pack& p) {
  const T* e = reinterpret_cast<const T*>(&p);
#pragma unroll
  for (int i = 0; i < PackTraits<T>::kElems; ++i) acc[i] += toFloat(e[i]);
}

template <typename T>
__device__ __forceinline__ Pack toPack(const float (&acc)[PackTraits<T>::kElems]) {
  Pack p;
  T* e = reinterpret_cast<T*>(&p);
#pragma unroll
  for (int i = 0; i < PackTraits<T>::kElems; ++i) e[i] = fromFloat<T>(acc[i]);
  return p;
}

}  // namespace fc::dev
