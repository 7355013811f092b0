// Buffer argument checks (issue 24) on real GPUs. A count or shape too large for any
// buffer is said so, before (and instead of) an overlap message. Pageable host memory
// (malloc), pinned host memory, freed device memory and another GPU's memory are
// refused by every entry point with fcInvalidArgument naming the function and the
// argument; nothing is enqueued (poisoned outputs keep their poison, a host output
// its contents), no CUDA error is left behind, and the communicator stays usable.
// Inside a CUDA graph capture the check runs at capture time and leaves the capture
// valid. Managed memory is accepted.
//
// Refused calls launch nothing and talk to no peer: they are rank-local, so a rank
// may skip them (another GPU's memory, when only one GPU is visible) without
// unpairing the collectives that follow.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "fc_data.h"
#include "gpu_env.h"

namespace {

std::vector<char> download(const void* src, size_t bytes) {
  std::vector<char> h(bytes);
  CUDA_REQUIRE(cudaMemcpy(h.data(), src, bytes, cudaMemcpyDeviceToHost));
  return h;
}

bool allBytes(const std::vector<char>& h, char value) {
  return std::all_of(h.begin(), h.end(), [value](char c) { return c == value; });
}

// Valid device buffers for every entry point's other arguments, outputs poisoned
// (all-ones: NaN in every dtype): a refused call must leave them so.
struct Valid {
  static constexpr size_t kCount = 4096;                // fp32 elements per rank block
  static constexpr size_t kMs = 16, kN = 64, kK = 32;   // fused shapes (bf16), M = kMs * nranks
  explicit Valid(size_t nranks)
      : W(nranks), M(kMs * nranks), in(W * kCount * 4), out(W * kCount * 4), A(M * kK * 2), B(kK * kN * 2),
        C(M * kN * 2), G(M * kK * 2) {
    CUDA_REQUIRE(cudaMemset(in.p, 0, W * kCount * 4));
    CUDA_REQUIRE(cudaMemset(A.p, 0, M * kK * 2));
    CUDA_REQUIRE(cudaMemset(B.p, 0, kK * kN * 2));
    for (const DeviceBuffer* o : {&out, &C, &G}) CUDA_REQUIRE(cudaMemset(o->p, 0xff, bytesOf(*o)));
    CUDA_REQUIRE(cudaDeviceSynchronize());
  }
  size_t bytesOf(const DeviceBuffer& b) const {
    return &b == &out ? W * kCount * 4 : &b == &C ? M * kN * 2 : M * kK * 2;
  }
  // The outputs still hold their poison.
  bool untouched() const {
    CUDA_REQUIRE(cudaDeviceSynchronize());
    bool same = true;
    for (const DeviceBuffer* o : {&out, &C, &G}) same = same && allBytes(download(o->p, bytesOf(*o)), char(0xff));
    return same;
  }
  // The largest buffer any argument slot describes, in bytes.
  size_t largestSlot() const { return std::max({W * kCount * 4, M * kN * 2, M * kK * 2, kK * kN * 2}); }

  const size_t W, M;
  DeviceBuffer in, out, A, B, C, G;
};

// fcInvalidArgument, the message naming `fn`, the argument and `what`.
void expectRefused(fcResult_t r, const char* fn, const char* arg, const std::string& what) {
  const std::string msg = fcGetLastError(nullptr);
  INFO(fn << " with a bad " << arg << ": " << fcGetErrorString(r) << ": " << msg);
  CHECK(r == fcInvalidArgument);
  CHECK(msg.find(fn) != std::string::npos);
  CHECK(msg.find(std::string(arg) + " (") != std::string::npos);
  CHECK(msg.find(what) != std::string::npos);
}

// Every entry point with `bad` in each of its buffer arguments in turn.
void refuseEverywhere(const GpuEnv& env, const Valid& v, void* bad, const std::string& what) {
  cudaStream_t s = env.streams[0];
  fcComm_t comm = env.comm;
  const size_t n = Valid::kCount, M = v.M, N = Valid::kN, K = Valid::kK;
  void *in = v.in.p, *out = v.out.p, *A = v.A.p, *B = v.B.p, *C = v.C.p, *G = v.G.p;
  expectRefused(fcAllReduce(bad, out, n, fcFloat32, fcSum, comm, s), "fcAllReduce", "sendbuff", what);
  expectRefused(fcAllReduce(in, bad, n, fcFloat32, fcSum, comm, s), "fcAllReduce", "recvbuff", what);
  expectRefused(fcAllReduceOneShot(bad, out, n, fcFloat32, fcSum, comm, s), "fcAllReduceOneShot", "sendbuff",
                what);
  expectRefused(fcAllReduceOneShot(in, bad, n, fcFloat32, fcSum, comm, s), "fcAllReduceOneShot", "recvbuff",
                what);
  expectRefused(fcReduceScatter(bad, out, n, fcFloat32, fcSum, comm, s), "fcReduceScatter", "sendbuff", what);
  expectRefused(fcReduceScatter(in, bad, n, fcFloat32, fcSum, comm, s), "fcReduceScatter", "recvbuff", what);
  expectRefused(fcAllGather(bad, out, n, fcFloat32, comm, s), "fcAllGather", "sendbuff", what);
  expectRefused(fcAllGather(in, bad, n, fcFloat32, comm, s), "fcAllGather", "recvbuff", what);
  const char* agmm = "fcAllGatherMatmul";
  expectRefused(fcAllGatherMatmul(bad, B, C, G, M, N, K, fcOpN, fcBfloat16, comm, s), agmm, "A", what);
  expectRefused(fcAllGatherMatmul(A, bad, C, G, M, N, K, fcOpN, fcBfloat16, comm, s), agmm, "B", what);
  expectRefused(fcAllGatherMatmul(A, B, bad, G, M, N, K, fcOpN, fcBfloat16, comm, s), agmm, "C", what);
  expectRefused(fcAllGatherMatmul(A, B, C, bad, M, N, K, fcOpN, fcBfloat16, comm, s), agmm, "Agathered", what);
  const char* mmrs = "fcMatmulReduceScatter";
  // MMRS's A is [M, K]: G has that size.
  expectRefused(fcMatmulReduceScatter(bad, B, C, M, N, K, fcOpN, fcBfloat16, comm, s), mmrs, "A", what);
  expectRefused(fcMatmulReduceScatter(G, bad, C, M, N, K, fcOpN, fcBfloat16, comm, s), mmrs, "B", what);
  expectRefused(fcMatmulReduceScatter(G, B, bad, M, N, K, fcOpN, fcBfloat16, comm, s), mmrs, "C", what);
  CHECK(v.untouched());
  // The check's own CUDA queries leave no error for the caller's next cudaGetLastError.
  CHECK(cudaGetLastError() == cudaSuccess);
}

// Collective: a correct all-reduce on the suite's communicator after the refusals,
// exact, and no asynchronous error.
void checkStillUsable(const GpuEnv& env, const Valid& v) {
  const size_t n = Valid::kCount;
  const uint64_t seed = freshSeed();
  const std::vector<char> h = fcPatternInput(fcFloat32, n, seed, env.rank);
  CUDA_REQUIRE(cudaMemcpy(v.in.p, h.data(), h.size(), cudaMemcpyHostToDevice));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  const fcResult_t r = fcAllReduce(v.in.p, v.out.p, n, fcFloat32, fcSum, env.comm, env.streams[0]);
  CUDA_REQUIRE(cudaStreamSynchronize(env.streams[0]));
  INFO("the all-reduce after the refusals: " << fcGetLastError(nullptr));
  CHECK(r == fcSuccess);
  CHECK(fcPatternSumError(download(v.out.p, n * 4).data(), fcFloat32, n, seed, env.nranks) == 0.0);
  fcResult_t async = fcInternalError;
  CHECK(fcCommGetAsyncError(env.comm, &async) == fcSuccess);
  CHECK(async == fcSuccess);
}

}  // namespace

TEST_CASE("buffer checks: malloc'd host memory is refused by every entry point, nothing runs, the comm stays usable") {
  const GpuEnv& env = gpuEnv();
  const Valid v(size_t(env.nranks));
  const size_t bytes = v.largestSlot();
  char* host = static_cast<char*>(std::malloc(bytes));
  REQUIRE(host != nullptr);
  std::memset(host, 0x5a, bytes);
  refuseEverywhere(env, v, host, "is host memory");
  CHECK(std::all_of(host, host + bytes, [](char c) { return c == 0x5a; }));  // not written either
  std::free(host);
  checkStillUsable(env, v);
}

TEST_CASE("buffer checks: pinned host memory is refused by every entry point") {
  const GpuEnv& env = gpuEnv();
  const Valid v(size_t(env.nranks));
  const size_t bytes = v.largestSlot();
  void* pinned = nullptr;
  CUDA_REQUIRE(cudaMallocHost(&pinned, bytes));
  std::memset(pinned, 0x5a, bytes);
  refuseEverywhere(env, v, pinned, "pinned host memory");
  const char* p = static_cast<const char*>(pinned);
  CHECK(std::all_of(p, p + bytes, [](char c) { return c == 0x5a; }));
  CUDA_REQUIRE(cudaFreeHost(pinned));
  checkStillUsable(env, v);
}

TEST_CASE("buffer checks: freed device memory is refused by every entry point") {
  const GpuEnv& env = gpuEnv();
  const Valid v(size_t(env.nranks));
  // Large enough for a mapping of its own (small allocations may share one with live
  // ones); nothing is allocated between the free and the calls, so the range is not
  // reused meanwhile.
  void* freed = nullptr;
  CUDA_REQUIRE(cudaMalloc(&freed, 64u << 20));
  CUDA_REQUIRE(cudaFree(freed));
  refuseEverywhere(env, v, freed, "freed device memory");
  checkStillUsable(env, v);
}

TEST_CASE("buffer checks: memory of another GPU is refused by every entry point") {
  // No collective call in this test case: a rank that skips it stays paired.
  const GpuEnv& env = gpuEnv();
  int ndev = 0;
  CUDA_REQUIRE(cudaGetDeviceCount(&ndev));
  if (ndev < 2)
    SKIP("this process sees one GPU (one per rank): no other GPU's memory to pass");
  const Valid v(size_t(env.nranks));
  const int other = (env.device + 1) % ndev;
  void* foreign = nullptr;
  CUDA_REQUIRE(cudaSetDevice(other));
  const cudaError_t alloc = cudaMalloc(&foreign, v.largestSlot());
  CUDA_REQUIRE(cudaSetDevice(env.device));
  CUDA_REQUIRE(alloc);
  refuseEverywhere(env, v, foreign, "device memory of GPU " + std::to_string(other) +
                                        ", not of the communicator's GPU " + std::to_string(env.device));
  CUDA_REQUIRE(cudaSetDevice(other));
  CUDA_REQUIRE(cudaFree(foreign));
  CUDA_REQUIRE(cudaSetDevice(env.device));
}

TEST_CASE("buffer checks: refused at capture time, the capture stays valid and its graph replays") {
  const GpuEnv& env = gpuEnv();
  const Valid v(size_t(env.nranks));
  const size_t n = Valid::kCount;
  std::vector<float> host(n, 1.f);
  cudaStream_t s;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* freed = nullptr;
  CUDA_REQUIRE(cudaMalloc(&freed, 64u << 20));
  CUDA_REQUIRE(cudaFree(freed));
  // Global mode: the strictest about CUDA calls made during a capture.
  CUDA_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  const fcResult_t hostSend = fcAllReduce(host.data(), v.out.p, n, fcFloat32, fcSum, env.comm, s);
  const std::string hostMsg = fcGetLastError(nullptr);
  const fcResult_t freedRecv = fcAllReduce(v.in.p, freed, n, fcFloat32, fcSum, env.comm, s);
  const std::string freedMsg = fcGetLastError(nullptr);
  const fcResult_t good = fcAllReduce(v.in.p, v.out.p, n, fcFloat32, fcSum, env.comm, s);
  const std::string goodMsg = fcGetLastError(nullptr);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s, &graph);
  INFO("host sendbuff: " << hostMsg << "; freed recvbuff: " << freedMsg << "; valid: " << goodMsg);
  CHECK(hostSend == fcInvalidArgument);
  CHECK(hostMsg.find("sendbuff") != std::string::npos);
  CHECK(freedRecv == fcInvalidArgument);
  CHECK(freedMsg.find("recvbuff") != std::string::npos);
  CUDA_REQUIRE(ended);  // the checks did not invalidate the capture
  REQUIRE(good == fcSuccess);
  cudaGraphExec_t exec;
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    const uint64_t seed = freshSeed();
    const std::vector<char> h = fcPatternInput(fcFloat32, n, seed, env.rank);
    CUDA_REQUIRE(cudaMemcpy(v.in.p, h.data(), h.size(), cudaMemcpyHostToDevice));
    CUDA_REQUIRE(cudaMemset(v.out.p, 0xff, n * 4));
    CUDA_REQUIRE(cudaDeviceSynchronize());
    CUDA_REQUIRE(cudaGraphLaunch(exec, s));
    CUDA_REQUIRE(cudaStreamSynchronize(s));
    INFO("replay " << replay);
    CHECK(fcPatternSumError(download(v.out.p, n * 4).data(), fcFloat32, n, seed, env.nranks) == 0.0);
  }
  CHECK(std::all_of(host.begin(), host.end(), [](float x) { return x == 1.f; }));
  CUDA_REQUIRE(cudaGraphExecDestroy(exec));
  CUDA_REQUIRE(cudaGraphDestroy(graph));
  CUDA_REQUIRE(cudaStreamDestroy(s));
}

TEST_CASE("buffer checks: managed memory is accepted") {
  const GpuEnv& env = gpuEnv();
  // One-shot (Lamport) and two-shot sizes.
  for (const size_t n : {size_t(4096), size_t(1) << 20}) {
    void *in = nullptr, *out = nullptr;
    CUDA_REQUIRE(cudaMallocManaged(&in, n * 4));
    CUDA_REQUIRE(cudaMallocManaged(&out, n * 4));
    const uint64_t seed = freshSeed();
    const std::vector<char> h = fcPatternInput(fcFloat32, n, seed, env.rank);
    std::memcpy(in, h.data(), h.size());
    std::memset(out, 0xff, n * 4);
    const fcResult_t r = fcAllReduce(in, out, n, fcFloat32, fcSum, env.comm, env.streams[0]);
    CUDA_REQUIRE(cudaStreamSynchronize(env.streams[0]));
    INFO("count " << n << ": " << fcGetLastError(nullptr));
    CHECK(r == fcSuccess);
    CHECK(fcPatternSumError(out, fcFloat32, n, seed, env.nranks) == 0.0);
    CUDA_REQUIRE(cudaFree(in));
    CUDA_REQUIRE(cudaFree(out));
  }
}

TEST_CASE("size checks come before overlap checks: a count or shape too large says so") {
  const GpuEnv& env = gpuEnv();
  const Valid v(size_t(env.nranks));
  cudaStream_t s = env.streams[0];
  fcComm_t comm = env.comm;
  char* in = v.in.c();
  auto tooLarge = [](fcResult_t r, const char* fn, const char* countName) {
    const std::string msg = fcGetLastError(nullptr);
    INFO(fn << ": " << msg);
    CHECK(r == fcInvalidArgument);
    CHECK(msg.find(fn) != std::string::npos);
    CHECK(msg.find(countName) != std::string::npos);
    CHECK(msg.find("too large") != std::string::npos);
    CHECK(msg.find("overlap") == std::string::npos);
  };
  // The case: 2^62 bf16 elements (2^63 bytes) with overlapping buffers used to
  // be reported as "sendbuff and recvbuff overlap".
  const size_t huge = size_t(1) << 62;
  tooLarge(fcAllReduce(in, in + 16, huge, fcBfloat16, fcSum, comm, s), "fcAllReduce", "count");
  tooLarge(fcAllReduceOneShot(in, in + 16, huge, fcBfloat16, fcSum, comm, s), "fcAllReduceOneShot", "count");
  tooLarge(fcReduceScatter(in, in + 16, huge / 2, fcBfloat16, fcSum, comm, s), "fcReduceScatter", "recvcount");
  tooLarge(fcAllGather(in, in + 16, huge, fcBfloat16, comm, s), "fcAllGather", "sendcount");
  // Just over 2^48 bytes, and a buffer that would wrap around the address space.
  tooLarge(fcAllReduce(in, in + 16, (size_t(1) << 46) + 1, fcFloat32, fcSum, comm, s), "fcAllReduce", "count");
  void* top = reinterpret_cast<void*>(UINTPTR_MAX & ~uintptr_t(255));
  tooLarge(fcAllReduce(top, v.out.p, Valid::kCount, fcFloat32, fcSum, comm, s), "fcAllReduce", "count");
  // Fused ops: M*K*2 bytes over 2^48 with C == A, the product itself not overflowing.
  const size_t M = v.W << 30, N = 64, K = size_t(1) << 20;
  tooLarge(fcAllGatherMatmul(v.A.p, v.B.p, v.A.p, nullptr, M, N, K, fcOpN, fcBfloat16, comm, s),
           "fcAllGatherMatmul", "M, N, K");
  tooLarge(fcMatmulReduceScatter(v.A.p, v.B.p, v.A.p, M, N, K, fcOpN, fcBfloat16, comm, s), "fcMatmulReduceScatter",
           "M, N, K");
  // fcMemAlloc: every rank refuses the same size locally, before meeting the others.
  void* p = &p;
  tooLarge(fcMemAlloc(comm, &p, SIZE_MAX - 4096), "fcMemAlloc", "bytes");
  CHECK(p == nullptr);
  CHECK(v.untouched());
  checkStillUsable(env, v);
}
