// Communicator behaviour on real GPUs: the device-side barrier really waits for the
// slowest rank, operations on two streams and on two communicators do not
// interfere, and a healthy communicator reports no asynchronous error. (Any number
// of streams, graph capture and scratch: test_streams.cc.)
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "fc_data.h"
#include "gpu_env.h"

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Run `calls` all-reduces of `count` fp32 elements per (comm, stream) pair,
// interleaved call by call, with distinct inputs; return the number of wrong sums.
size_t interleaved(const std::vector<fcComm_t>& comms, const std::vector<cudaStream_t>& streams,
                   int rank, int nranks, size_t count, int calls) {
  const size_t lanes = comms.size();
  const size_t total = lanes * size_t(calls) * count;
  float *in, *out;
  CUDA_REQUIRE(cudaMalloc(reinterpret_cast<void**>(&in), total * sizeof(float)));
  CUDA_REQUIRE(cudaMalloc(reinterpret_cast<void**>(&out), total * sizeof(float)));
  const uint64_t seed = fcSplitMix(total * 7 + lanes);
  std::vector<char> h = fcPatternInput(fcFloat32, total, seed, rank);
  CUDA_REQUIRE(cudaMemcpy(in, h.data(), h.size(), cudaMemcpyHostToDevice));
  CUDA_REQUIRE(cudaMemset(out, 0xff, total * sizeof(float)));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  size_t failures = 0;
  for (int k = 0; k < calls; ++k)
    for (size_t l = 0; l < lanes; ++l) {
      const size_t off = (size_t(k) * lanes + l) * count;
      failures += fcAllReduceOneShot(in + off, out + off, count, fcFloat32, fcSum, comms[l],
                                     streams[l]) != fcSuccess;
    }
  CUDA_REQUIRE(cudaDeviceSynchronize());
  CHECK(failures == 0);
  CUDA_REQUIRE(cudaMemcpy(h.data(), out, h.size(), cudaMemcpyDeviceToHost));
  CUDA_REQUIRE(cudaFree(in));
  CUDA_REQUIRE(cudaFree(out));
  return fcPatternSumError(h.data(), fcFloat32, total, seed, nranks) == 0.0 ? 0 : 1;
}

}  // namespace

TEST_CASE("fcBarrier waits for the slowest rank") {
  const GpuEnv& env = gpuEnv();
  cudaStream_t s = env.streams[1];
  // Start line: everyone leaves a barrier together (within microseconds).
  FC_REQUIRE(fcBarrier(env.comm, s));
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  const auto t0 = Clock::now();
  // Rank r arrives r * 100 ms late; nobody may leave before the last one arrives.
  std::this_thread::sleep_for(std::chrono::milliseconds(100 * env.rank));
  FC_REQUIRE(fcBarrier(env.comm, s));
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  const double ms = msSince(t0);
  INFO("rank " << env.rank << " left the barrier after " << ms << " ms");
  CHECK(ms >= 100.0 * (env.nranks - 1) - 5.0);
  CHECK(ms < 100.0 * (env.nranks - 1) + 1000.0);
  fcResult_t async = fcInternalError;
  FC_REQUIRE(fcCommGetAsyncError(env.comm, &async));
  CHECK(async == fcSuccess);
}

TEST_CASE("operations on two streams of one communicator, issued alternately, do not interfere") {
  const GpuEnv& env = gpuEnv();
  // Sizes that use many CTAs and the same workspace bytes on both channels.
  for (size_t count : {size_t(1000), size_t(1) << 18}) {
    INFO("count " << count);
    CHECK(interleaved({env.comm, env.comm}, {env.streams[0], env.streams[1]}, env.rank, env.nranks,
                      count, 50) == 0);
  }
}

TEST_CASE("two communicators alive at once do not interfere") {
  const GpuEnv& env = gpuEnv();
  fcComm_t comm2 = nullptr;
  fcConfig_t config = FC_CONFIG_INITIALIZER;
  config.blocking = 0;  // non-blocking init: a handle now, readiness through the async state
  CHECK(makeComm(&comm2, &config) == fcInProgress);
  REQUIRE(comm2 != nullptr);
  fcResult_t state = fcInProgress;
  const auto t0 = Clock::now();
  while (state == fcInProgress && msSince(t0) < 30000) {
    FC_REQUIRE(fcCommGetAsyncError(comm2, &state));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  INFO(fcGetLastError(nullptr));
  REQUIRE(state == fcSuccess);
  const cudaStream_t* s = env.streams;
  CHECK(interleaved({env.comm, comm2}, {s[0], s[0]}, env.rank, env.nranks, 1 << 17, 50) == 0);
  CHECK(interleaved({env.comm, comm2}, {s[0], s[1]}, env.rank, env.nranks, 1 << 17, 50) == 0);
  CHECK(interleaved({comm2, env.comm}, {s[1], s[0]}, env.rank, env.nranks, 1000, 50) == 0);
  FC_REQUIRE(fcCommDestroy(comm2));
}

TEST_CASE("ranks that lay out the heap differently (FC_ARNORM_GATHER_SET) are refused, on every rank") {
  const GpuEnv& env = gpuEnv();
  // Rank 0 alone asks for the two-shot norm's gather sets: every rank must refuse.
  if (env.rank == 0) setenv("FC_ARNORM_GATHER_SET", "1", 1);
  fcComm_t comm = nullptr;
  fcConfig_t config = FC_CONFIG_INITIALIZER;
  config.workspaceBytes = GpuEnv::kWorkspaceBytes;
  const fcResult_t r = makeComm(&comm, &config);
  const std::string why = fcGetLastError(nullptr);
  if (env.rank == 0) unsetenv("FC_ARNORM_GATHER_SET");
  INFO(why);
  CHECK(r == fcInvalidUsage);
  CHECK(why.find("FC_ARNORM_GATHER_SET") != std::string::npos);
  if (r == fcSuccess) fcCommDestroy(comm);
}

TEST_CASE("bad launches: wrong current device, stream of another device") {
  const GpuEnv& env = gpuEnv();
  float* buf;
  CUDA_REQUIRE(cudaMalloc(reinterpret_cast<void**>(&buf), 64 * sizeof(float)));
  int ndev = 0;
  CUDA_REQUIRE(cudaGetDeviceCount(&ndev));
  if (ndev > 1) {
    // A stream of another device, and then the wrong current device.
    const int other = (env.device + 1) % ndev;
    cudaStream_t foreign;
    CUDA_REQUIRE(cudaSetDevice(other));
    CUDA_REQUIRE(cudaStreamCreateWithFlags(&foreign, cudaStreamNonBlocking));
    CHECK(fcAllReduceOneShot(buf, buf, 64, fcFloat32, fcSum, env.comm, nullptr) == fcInvalidUsage);
    CHECK(std::string(fcGetLastError(nullptr)).find("current device") != std::string::npos);
    CUDA_REQUIRE(cudaSetDevice(env.device));
    CHECK(fcAllReduceOneShot(buf, buf, 64, fcFloat32, fcSum, env.comm, foreign) == fcInvalidUsage);
    CHECK(std::string(fcGetLastError(nullptr)).find("stream belongs to device") != std::string::npos);
    CUDA_REQUIRE(cudaSetDevice(other));
    CUDA_REQUIRE(cudaStreamDestroy(foreign));
    CUDA_REQUIRE(cudaSetDevice(env.device));
  }
  CUDA_REQUIRE(cudaFree(buf));
}
