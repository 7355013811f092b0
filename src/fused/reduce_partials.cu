// The last step of fcMatmulReduceScatter: out = round(own + sum of the received
// fp32 partial products), summed in fp32 and rounded once to the output type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "collectives/launch.h"
#include "core/result.h"
#include "device/pack.cuh"
#include "fused/fused.h"

namespace fc {
namespace {

constexpr int kThreads = 512;

// Four elements per thread and step: one 16-byte load per input (all in flight
// before the first add), one 8-byte store of bf16/fp16.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    reducePartialsKernel(const float* own, const float* received, size_t blockElems, int nreceived, T* out,
                         size_t n, bool vec) {
  const size_t step = size_t(gridDim.x) * kThreads * 4;
  for (size_t i = (size_t(blockIdx.x) * kThreads + threadIdx.x) * 4; i < n; i += step) {
    if (vec && i + 4 <= n) {
      float4 acc = *reinterpret_cast<const float4*>(own + i);
      for (int j = 0; j < nreceived; ++j) {
        const float4 v = *reinterpret_cast<const float4*>(received + j * blockElems + i);
        acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
      }
      T o[4] = {dev::fromFloat<T>(acc.x), dev::fromFloat<T>(acc.y), dev::fromFloat<T>(acc.z),
                dev::fromFloat<T>(acc.w)};
      *reinterpret_cast<uint2*>(out + i) = *reinterpret_cast<const uint2*>(o);
    } else {
      for (size_t e = i; e < i + 4 && e < n; ++e) {
        float a = own[e];
        for (int j = 0; j < nreceived; ++j) a += received[j * blockElems + e];
        out[e] = dev::fromFloat<T>(a);
      }
    }
  }
}

template <typename T>
fcResult_t launch(const float* own, const float* received, size_t blockElems, int nreceived, void* out, size_t n,
                  cudaStream_t stream) {
  const bool vec = (reinterpret_cast<uintptr_t>(out) % 8) == 0 && blockElems % 4 == 0;
  const size_t quads = (n + 3) / 4;
  const unsigned grid = unsigned(std::min<size_t>((quads + kThreads - 1) / kThreads, 264));
  return launchKernel(reducePartialsKernel<T>, dim3(grid), dim3(kThreads), stream, own, received, blockElems,
                      nreceived, static_cast<T*>(out), n, vec);
}

}  // namespace

fcResult_t launchReducePartials(const float* own, const float* received, size_t blockElems, int nreceived,
                                void* out, size_t n, fcDataType_t datatype, cudaStream_t stream) {
  if (datatype == fcBfloat16)
    return launch<__nv_bfloat16>(own, received, blockElems, nreceived, out, n, stream);
  if (datatype == fcFloat16) return launch<__half>(own, received, blockElems, nreceived, out, n, stream);
  return setError(fcInternalError, "reduce partials: datatype %d", int(datatype));
}

}  // namespace fc
