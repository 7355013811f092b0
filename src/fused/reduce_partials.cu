// The last step of fcMatmulReduceScatter: out = round(own + sum of the received
// partial products), the partials in fp32 or in the output type, summed in fp32 and
// rounded once to the output type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "collectives/launch.h"
#include "core/preload.h"
#include "core/result.h"
#include "device/pack.cuh"
#include "fused/fused.h"

namespace fc {
namespace {

constexpr int kThreads = 512;

// Four elements of a partial at p, as floats: one 16-byte load (fp32) or one 8-byte
// load (bf16/fp16).
template <typename P>
__device__ __forceinline__ float4 load4(const P* p) {
  if constexpr (sizeof(P) == 4) {
    return *reinterpret_cast<const float4*>(p);
  } else {
    const uint2 w = *reinterpret_cast<const uint2*>(p);
    const P* e = reinterpret_cast<const P*>(&w);
    return float4{dev::toFloat(e[0]), dev::toFloat(e[1]), dev::toFloat(e[2]), dev::toFloat(e[3])};
  }
}

// Four elements per thread and step: one load per input (all in flight before the
// first add), one 8-byte store of bf16/fp16.
template <typename P, typename T>
__global__ void __launch_bounds__(kThreads)
    reducePartialsKernel(const P* own, const P* received, size_t blockElems, int nreceived, T* out, size_t n,
                         bool vec) {
  const size_t step = size_t(gridDim.x) * kThreads * 4;
  for (size_t i = (size_t(blockIdx.x) * kThreads + threadIdx.x) * 4; i < n; i += step) {
    if (vec && i + 4 <= n) {
      float4 acc = load4(own + i);
      for (int j = 0; j < nreceived; ++j) {
        const float4 v = load4(received + j * blockElems + i);
        acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
      }
      T o[4] = {dev::fromFloat<T>(acc.x), dev::fromFloat<T>(acc.y), dev::fromFloat<T>(acc.z),
                dev::fromFloat<T>(acc.w)};
      *reinterpret_cast<uint2*>(out + i) = *reinterpret_cast<const uint2*>(o);
    } else {
      for (size_t e = i; e < i + 4 && e < n; ++e) {
        float a = dev::toFloat(own[e]);
        for (int j = 0; j < nreceived; ++j) a += dev::toFloat(received[j * blockElems + e]);
        out[e] = dev::fromFloat<T>(a);
      }
    }
  }
}

template <typename P, typename T>
fcResult_t launch(const void* own, const void* received, size_t blockElems, int nreceived, void* out, size_t n,
                  cudaStream_t stream) {
  const bool vec = (reinterpret_cast<uintptr_t>(out) % 8) == 0 && blockElems % 4 == 0 &&
                   (reinterpret_cast<uintptr_t>(own) | reinterpret_cast<uintptr_t>(received)) % (4 * sizeof(P)) == 0;
  const size_t quads = (n + 3) / 4;
  const unsigned grid = unsigned(std::min<size_t>((quads + kThreads - 1) / kThreads, 264));
  return launchKernel(reducePartialsKernel<P, T>, dim3(grid), dim3(kThreads), stream, static_cast<const P*>(own),
                      static_cast<const P*>(received), blockElems, nreceived, static_cast<T*>(out), n, vec);
}

template <typename T>
fcResult_t launchFor(fcDataType_t partials, const void* own, const void* received, size_t blockElems, int nreceived,
                     void* out, size_t n, cudaStream_t stream) {
  if (partials == fcFloat32) return launch<float, T>(own, received, blockElems, nreceived, out, n, stream);
  return launch<T, T>(own, received, blockElems, nreceived, out, n, stream);
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(reducePartialsKernel<float, __nv_bfloat16>);

fcResult_t launchReducePartials(const void* own, const void* received, size_t blockElems, int nreceived,
                                fcDataType_t partials, void* out, size_t n, fcDataType_t datatype,
                                cudaStream_t stream) {
  if (partials != fcFloat32 && partials != datatype)
    return setError(fcInternalError, "reduce partials: partials %d for output %d", int(partials), int(datatype));
  if (datatype == fcBfloat16)
    return launchFor<__nv_bfloat16>(partials, own, received, blockElems, nreceived, out, n, stream);
  if (datatype == fcFloat16) return launchFor<__half>(partials, own, received, blockElems, nreceived, out, n, stream);
  return setError(fcInternalError, "reduce partials: datatype %d", int(datatype));
}

}  // namespace fc
