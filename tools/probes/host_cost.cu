// host-cost: the host time of one eager libfusedcomm call, next to the bare launch it
// ends in (issue 23: <= 2.5 us per call up to 64 KiB). One rank (fcCommInitAll on GPU
// 0): the same checks, queries and one kernel launch per call as at any world size.
// Per variant, batches of 100 calls issued from an idle stream (so that the GPU's
// queue never fills and stalls the host), best of 20 batches:
//   launch        cudaLaunchKernelEx of an empty 128 x 160 kernel with the
//                 programmatic-serialization attribute (how the small kernels launch)
//   allreduce     fcAllReduce of 8 KiB and 64 KiB, bf16
//   no-checks     the same on a communicator with FC_CHECK_POINTERS=0
//   no-pdl        FC_PDL=0
//   two-streams   fcAllReduce alternating between two streams (each call waits for
//                 the previous one's event)
//   build/tools/probes/host-cost
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "fusedcomm.h"
#include "probe_check.h"

namespace {

__global__ void empty(int* p) {
  if (p != nullptr && threadIdx.x == 1000) *p = 1;
}

// A one-rank communicator made with var=value (NULL: the defaults).
fcComm_t commWith(const char* var, const char* value) {
  if (var) setenv(var, value, 1);
  fcComm_t comm;
  int dev = 0;
  FC_CK(fcCommInitAll(&comm, 1, &dev));
  if (var) unsetenv(var);
  return comm;
}

// Host microseconds per call of `call(i)`: best of 20 batches of 100 from an idle stream.
double hostUs(cudaStream_t s1, cudaStream_t s2, const std::function<void(int)>& call) {
  using Clock = std::chrono::steady_clock;
  double best = 1e30;
  for (int rep = 0; rep < 20; ++rep) {
    CK(cudaStreamSynchronize(s1));
    CK(cudaStreamSynchronize(s2));
    const auto t0 = Clock::now();
    for (int i = 0; i < 100; ++i) call(i);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 100;
    if (us < best) best = us;
  }
  CK(cudaDeviceSynchronize());
  return best;
}

}  // namespace

int main() {
  requireGpu();
  CK(cudaSetDevice(0));
  cudaStream_t s1, s2;
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  fcComm_t plain = commWith(nullptr, nullptr), noChecks = commWith("FC_CHECK_POINTERS", "0"),
           noPdl = commWith("FC_PDL", "0");
  void *in, *out;
  CK(cudaMalloc(&in, 1 << 20));
  CK(cudaMalloc(&out, 1 << 20));
  CK(cudaMemset(in, 0, 1 << 20));
  cudaLaunchAttribute pdl;
  cudaLaunchConfig_t cfg = pdlLaunchConfig(dim3(128), dim3(160), s1, &pdl);
  int* none = nullptr;
  printf("# host-cost: host us per call, best of 20 batches of 100 calls from an idle stream, one rank\n");
  printf("launch,%.2f\n", hostUs(s1, s2, [&](int) { CK(cudaLaunchKernelEx(&cfg, empty, none)); }));
  for (size_t bytes : {size_t(8) << 10, size_t(64) << 10}) {
    const size_t n = bytes / 2;
    auto on = [&](fcComm_t comm) {
      return hostUs(s1, s2, [&, comm](int) { FC_CK(fcAllReduce(in, out, n, fcBfloat16, fcSum, comm, s1)); });
    };
    const double two = hostUs(s1, s2, [&](int i) {
      FC_CK(fcAllReduce(in, out, n, fcBfloat16, fcSum, plain, (i & 1) ? s2 : s1));
    });
    printf("allreduce %zu KiB,%.2f\nno-checks %zu KiB,%.2f\nno-pdl %zu KiB,%.2f\ntwo-streams %zu KiB,%.2f\n",
           bytes >> 10, on(plain), bytes >> 10, on(noChecks), bytes >> 10, on(noPdl), bytes >> 10, two);
  }
  for (fcComm_t c : {plain, noChecks, noPdl}) FC_CK(fcCommDestroy(c));
  CK(cudaFree(in));
  CK(cudaFree(out));
  return 0;
}
