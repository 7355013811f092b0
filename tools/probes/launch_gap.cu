// launch-gap: what an eager launch costs on this machine, apart from any library.
//   1. host time per launch of an empty kernel (128 CTAs x 160 threads, the small
//      all-reduce's shape), alone and with the runtime calls libfusedcomm makes per
//      op (capture info, stream id, current device, an event record, a wait), and
//      in batches of 100 by launch API (runtime, launch-ex with PDL, driver), and
//      each of those runtime calls (and the pointer check's driver call) alone;
//   2. GPU time per kernel of back-to-back kernels that spin for 3 and 7 us, eager
//      (with and without an event record after each) and as a CUDA graph: the gap
//      between two eagerly launched kernels against a graph's.
// Run on the GPU machine: build/tools/probes/launch-gap
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>

#include "probe_check.h"

namespace {

__global__ void empty(int* p) {
  if (p != nullptr && threadIdx.x == 1000) *p = 1;
}

__global__ void spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

#define OK(call)                                                                 \
  do {                                                                           \
    cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess) {                                                     \
      fprintf(stderr, "launch-gap: %s: %s\n", #call, cudaGetErrorString(e_));    \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

}  // namespace

int main() {
  requireGpu();
  cudaStream_t s;
  cudaEvent_t e, a, b;
  OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  OK(cudaEventCreate(&a));
  OK(cudaEventCreate(&b));
  using Clock = std::chrono::steady_clock;
  const int n = 2000;
  const char* hostModes[] = {"launch only", "+ event record", "+ capture info, stream id, device, record",
                             "+ all that, + a wait"};
  for (int mode = 0; mode < 4; ++mode) {
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      OK(cudaStreamSynchronize(s));
      const auto t0 = Clock::now();
      for (int i = 0; i < n; ++i) {
        if (mode >= 2) {
          cudaStreamCaptureStatus st;
          unsigned long long id;
          int dev;
          cudaStreamGetCaptureInfo(s, &st, &id);
          cudaStreamGetId(s, &id);
          cudaGetDevice(&dev);
        }
        empty<<<128, 160, 0, s>>>(nullptr);
        if (mode >= 1) cudaEventRecord(e, s);
        if (mode == 3) cudaStreamWaitEvent(s, e, 0);
      }
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n;
      if (us < best) best = us;
    }
    printf("host per launch, %s: %.2f us\n", hostModes[mode], best);
  }
  // The same in batches of 100 launches, each batch timed from an idle stream, so that
  // the GPU's queue never fills (2000 back-to-back launches of a kernel that takes about
  // as long on the GPU as its launch on the host could time the GPU instead), and by
  // launch API: where an eager call's host time can shrink.
  CUfunction fn = nullptr;
  OK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&fn), reinterpret_cast<const void*>(empty)));
  using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                CUstream, void**, void**);
  LaunchFn cuLaunch = nullptr;
  cudaDriverEntryPointQueryResult q;
  OK(cudaGetDriverEntryPointByVersion("cuLaunchKernel", reinterpret_cast<void**>(&cuLaunch), 12000,
                                      cudaEnableDefault, &q));
  const char* apiModes[] = {"<<<128, 160>>>", "<<<1, 32>>>", "cudaLaunchKernelEx, PDL attribute",
                            "cuLaunchKernel (driver)"};
  for (int mode = 0; mode < 4; ++mode) {
    double best = 1e30;
    int* none = nullptr;
    void* args[] = {&none};
    cudaLaunchAttribute pdl;
    cudaLaunchConfig_t cfg = pdlLaunchConfig(dim3(128), dim3(160), s, &pdl);
    for (int rep = 0; rep < 20; ++rep) {
      OK(cudaStreamSynchronize(s));
      const auto t0 = Clock::now();
      for (int i = 0; i < 100; ++i) {
        if (mode == 0) empty<<<128, 160, 0, s>>>(nullptr);
        else if (mode == 1) empty<<<1, 32, 0, s>>>(nullptr);
        else if (mode == 2) cudaLaunchKernelEx(&cfg, empty, none);
        else cuLaunch(fn, 128, 1, 1, 160, 1, 1, 0, reinterpret_cast<CUstream>(s), args, nullptr);
      }
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 100;
      if (us < best) best = us;
    }
    OK(cudaGetLastError());
    printf("host per launch, batches of 100, %s: %.2f us\n", apiModes[mode], best);
  }
  // What each runtime or driver call an op makes besides its launch costs alone
  // (10000 calls on an idle stream, best of 3).
  using PtrAttrsFn = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);
  PtrAttrsFn ptrAttrs = nullptr;
  OK(cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", reinterpret_cast<void**>(&ptrAttrs), 12000,
                                      cudaEnableDefault, &q));
  void* buf = nullptr;
  OK(cudaMalloc(&buf, 1 << 20));
  const char* callNames[] = {"cudaGetDevice", "cudaStreamGetCaptureInfo", "cudaStreamGetId", "cudaStreamGetDevice",
                             "cudaEventRecord", "cudaStreamWaitEvent", "cuPointerGetAttributes (3 attributes)"};
  for (int call = 0; call < 7; ++call) {
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      OK(cudaStreamSynchronize(s));
      const auto t0 = Clock::now();
      for (int i = 0; i < 10000; ++i) {
        int dev;
        unsigned long long id;
        cudaStreamCaptureStatus st;
        unsigned memoryType = 0, isManaged = 0;
        int ordinal = -1;
        CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
        void* data[3] = {&memoryType, &isManaged, &ordinal};
        switch (call) {
          case 0: cudaGetDevice(&dev); break;
          case 1: cudaStreamGetCaptureInfo(s, &st, &id); break;
          case 2: cudaStreamGetId(s, &id); break;
          case 3: cudaStreamGetDevice(s, &dev); break;
          case 4: cudaEventRecord(e, s); break;
          case 5: cudaStreamWaitEvent(s, e, 0); break;
          default: ptrAttrs(3, attrs, data, reinterpret_cast<CUdeviceptr>(buf)); break;
        }
      }
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 10000;
      if (us < best) best = us;
    }
    OK(cudaGetLastError());
    printf("host per call, %s: %.3f us\n", callNames[call], best);
  }
  OK(cudaFree(buf));
  for (unsigned long long ns : {3000ull, 7000ull}) {
    for (int mode = 0; mode < 3; ++mode) {
      float best = 1e30f;
      cudaGraph_t g = nullptr;
      cudaGraphExec_t x = nullptr;
      if (mode == 2) {
        OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < 100; ++i) spin<<<128, 160, 0, s>>>(ns);
        OK(cudaStreamEndCapture(s, &g));
        OK(cudaGraphInstantiate(&x, g, 0));
      }
      for (int rep = 0; rep < 3; ++rep) {
        OK(cudaStreamSynchronize(s));
        OK(cudaEventRecord(a, s));
        if (mode == 2) {
          for (int i = 0; i < n / 100; ++i) OK(cudaGraphLaunch(x, s));
        } else {
          for (int i = 0; i < n; ++i) {
            spin<<<128, 160, 0, s>>>(ns);
            if (mode == 1) cudaEventRecord(e, s);
          }
        }
        OK(cudaEventRecord(b, s));
        OK(cudaEventSynchronize(b));
        float ms;
        OK(cudaEventElapsedTime(&ms, a, b));
        if (ms < best) best = ms;
      }
      if (x) cudaGraphExecDestroy(x);
      if (g) cudaGraphDestroy(g);
      const double per = 1000.0 * best / n;
      printf("GPU per %llu-ns kernel, %s: %.2f us (gap %.2f us)\n", ns,
             mode == 0 ? "eager" : mode == 1 ? "eager + event record" : "graph", per, per - double(ns) / 1000);
    }
  }
  OK(cudaGetLastError());
  return 0;
}
