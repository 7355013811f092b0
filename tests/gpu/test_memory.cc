// fcMemAlloc / fcMemFree and the zero-copy path: a symmetric sendbuff is read by the
// peers where it is (no staging, no workspace limit); in-place or misaligned use
// falls back to staging; results are exact either way.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "fc_data.h"
#include "gpu_env.h"

namespace {

// Upload rank `rank`'s pattern, run one all-reduce, return the max error.
double runOnce(void* src, void* dst, fcDataType_t t, size_t count, uint64_t seed) {
  const GpuEnv& env = gpuEnv();
  std::vector<char> h = fcPatternInput(t, count, seed, env.rank);
  CUDA_REQUIRE(cudaMemcpy(src, h.data(), h.size(), cudaMemcpyHostToDevice));
  if (dst != src) CUDA_REQUIRE(cudaMemset(dst, 0xff, h.size()));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  fcResult_t r = fcAllReduceOneShot(src, dst, count, t, fcSum, env.comm, env.streams[0]);
  INFO(fcGetLastError(nullptr));
  CHECK(r == fcSuccess);
  CUDA_REQUIRE(cudaStreamSynchronize(env.streams[0]));
  CUDA_REQUIRE(cudaMemcpy(h.data(), dst, h.size(), cudaMemcpyDeviceToHost));
  return fcPatternSumError(h.data(), t, count, seed, env.nranks);
}

}  // namespace

TEST_CASE("fcMemAlloc: zeroed symmetric buffers; all-reduce reads them in place") {
  const GpuEnv& env = gpuEnv();
  void* small = nullptr;
  void* big = nullptr;
  FC_REQUIRE(fcMemAlloc(env.comm, &small, 1000));
  // Larger than the workspace: only the zero-copy path can reduce all of it at once.
  const size_t bigBytes = GpuEnv::kWorkspaceBytes + (8u << 20);
  FC_REQUIRE(fcMemAlloc(env.comm, &big, bigBytes));
  REQUIRE(small != nullptr);
  REQUIRE(big != nullptr);
  std::vector<char> first(1000);
  CUDA_REQUIRE(cudaMemcpy(first.data(), small, first.size(), cudaMemcpyDeviceToHost));
  CHECK(std::all_of(first.begin(), first.end(), [](char c) { return c == 0; }));

  void* out = nullptr;
  CUDA_REQUIRE(cudaMalloc(&out, bigBytes));
  const size_t bigCount = bigBytes / 4;
  CHECK(runOnce(big, out, fcFloat32, bigCount, 11) == 0.0);                   // zero copy, > workspace
  CHECK(runOnce(big, out, fcBfloat16, 100003, 12) == 0.0);                    // zero copy, odd count
  CHECK(runOnce(static_cast<char*>(big) + 16, out, fcFloat16, 4097, 13) == 0.0);  // offset 16 B
  CHECK(runOnce(static_cast<char*>(big) + 2, out, fcBfloat16, 4097, 14) == 0.0);  // misaligned: staged
  CHECK(runOnce(big, big, fcFloat32, 65536, 15) == 0.0);                      // in place: staged
  CHECK(runOnce(small, out, fcFloat32, 250, 16) == 0.0);

  CUDA_REQUIRE(cudaFree(out));
  FC_REQUIRE(fcMemFree(env.comm, small));
  CHECK(fcMemFree(env.comm, small) == fcInvalidArgument);  // already freed
  CHECK(fcMemFree(env.comm, static_cast<char*>(big) + 64) == fcInvalidArgument);
  FC_REQUIRE(fcMemFree(env.comm, big));
  void* p = reinterpret_cast<void*>(1);
  CHECK(fcMemAlloc(env.comm, &p, 0) == fcInvalidArgument);
  CHECK(p == nullptr);
}
