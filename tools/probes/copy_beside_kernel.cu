// Does a device-to-device cudaMemcpyAsync make progress while a persistent kernel
// holds every SM? The all-gather + GEMM engine relies on it: its GEMM (one CTA per
// SM, all of shared memory) waits for flags that the copy queue sets after its pulls.
// Between two GPUs a pull is a copy-engine transfer; between two allocations of the
// same GPU (two ranks sharing one GPU, FC_SHARE_GPU=1) it may be a copy kernel.
//
// A "hog" kernel fills every SM (one CTA per SM, the maximum dynamic shared memory)
// and spins until a flag is set or a deadline passes. Another stream copies `bytes`
// (device to device, same GPU; also host to device, and peer to peer when a second
// GPU exists) and then sets the flag with cuStreamWriteValue32, as the library's copy
// queue does. Prints, per case, whether the hog saw the flag and after how long.
//
// With --share, a second process on the same GPU first starts a kernel that spins for
// 4 s (as a rank waiting at a barrier does), so that the two contexts time-slice while
// the cases run; and the hog is launched in clusters of 2 CTAs, as the GEMM is.
//
// Usage: copy-beside-kernel [MiB] [--share]
#include <cuda.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "probe_check.h"

// result[0]: 1 if block 0 saw the flag; result[1]: its wait in microseconds.
__global__ void hog(const volatile unsigned* flag, unsigned long long deadlineNs, unsigned long long* result) {
  extern __shared__ char smem[];
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  unsigned seen = 0;
  do {
    seen = *flag;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (seen == 0 && t - t0 < deadlineNs);
  smem[threadIdx.x] = char(seen);  // keep the shared memory allocation
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    result[0] = seen != 0;
    result[1] = (t - t0) / 1000;
  }
}

// The other process's kernel: one CTA spinning until its deadline.
__global__ void spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

int main(int argc, char** argv) {
  const size_t bytes = size_t(argc > 1 ? std::atoi(argv[1]) : 16) << 20;
  const bool share = argc > 2 && std::string(argv[2]) == "--share";
  if (share && fork() == 0) {  // before any CUDA call: the child gets its own context
    CK(cudaSetDevice(0));
    spin<<<1, 32>>>(4000000000ull);
    CK(cudaDeviceSynchronize());
    std::printf("(the other process's 4 s kernel ended)\n");
    return 0;
  }
  int sms = 0, smem = 0, ngpu = 0;
  CK(cudaGetDeviceCount(&ngpu));
  CK(cudaSetDevice(0));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  CK(cudaFuncSetAttribute(hog, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  unsigned* flag;
  unsigned long long* result;
  char *src, *dst, *peer = nullptr, *host;
  CK(cudaMalloc(&flag, sizeof(unsigned)));
  CK(cudaMallocHost(&result, 2 * sizeof(unsigned long long)));
  CK(cudaMalloc(&src, bytes));
  CK(cudaMalloc(&dst, bytes));
  CK(cudaMallocHost(&host, bytes));
  CK(cudaMemset(src, 1, bytes));
  if (ngpu > 1) {
    int can = 0;
    CK(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (can) {
      CK(cudaDeviceEnablePeerAccess(1, 0));
      CK(cudaSetDevice(1));
      CK(cudaMalloc(&peer, bytes));
      CK(cudaSetDevice(0));
    }
  }
  // The driver entry point through the runtime, as the library gets it (no -lcuda).
  using WriteValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &fn, 12000, cudaEnableDefault, &q));
  if (fn == nullptr) {
    std::fprintf(stderr, "no cuStreamWriteValue32\n");
    return 1;
  }
  const WriteValue32 writeValue32 = reinterpret_cast<WriteValue32>(fn);
  cudaStream_t compute, copies;
  CK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking));
  std::printf("GPU 0: %d SMs, %d bytes of shared memory per CTA; copies of %zu MiB\n", sms, smem, bytes >> 20);

  struct Case {
    const char* name;
    char* to;
    const char* from;
  } cases[] = {{"flag only (no copy)", nullptr, nullptr},
               {"device to device, same GPU", dst, src},
               {"host to device", dst, host},
               {"peer (GPU 1) to GPU 0", dst, peer}};
  if (share) sleep(1);  // the other process's kernel is running by then
  for (const Case& c : cases) {
    if (c.to && !c.from) continue;  // no second GPU
    CK(cudaMemset(flag, 0, sizeof(unsigned)));
    CK(cudaDeviceSynchronize());
    // The hog first, then (once it surely holds the SMs) the copy and the flag.
    if (share) {
      cudaLaunchConfig_t cfg = {};
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = 2;
      attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
      cfg.gridDim = dim3(sms / 2 * 2);
      cfg.blockDim = dim3(128);
      cfg.dynamicSmemBytes = size_t(smem);
      cfg.stream = compute;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      CK(cudaLaunchKernelEx(&cfg, hog, static_cast<const volatile unsigned*>(flag), 2000000000ull, result));
    } else {
      hog<<<sms, 128, smem, compute>>>(flag, 2000000000ull, result);
    }
    CK(cudaGetLastError());
    struct timespec ts{0, 20 * 1000 * 1000};
    nanosleep(&ts, nullptr);
    if (c.to) CK(cudaMemcpyAsync(c.to, c.from, bytes, cudaMemcpyDefault, copies));
    if (writeValue32(copies, CUdeviceptr(flag), 1u, CU_STREAM_WRITE_VALUE_DEFAULT) != CUDA_SUCCESS) {
      std::fprintf(stderr, "cuStreamWriteValue32 failed\n");
      return 1;
    }
    CK(cudaDeviceSynchronize());
    std::printf("%-28s hog saw the flag: %s after %llu us\n", c.name, result[0] ? "yes" : "NO (deadline, 2 s)",
                result[1]);
  }
  if (share) wait(nullptr);
  return 0;
}
