// fcAllReduce (one-shot and two-shot), fcReduceScatter and fcAllGather on real
// GPUs: exact results for every dtype over sizes from one element to several
// workspace-sized passes, in and out of place, misaligned, zero-copy; mixed ops
// back to back and in a replayed CUDA graph.
#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "fc_data.h"
#include "gpu_env.h"
#include "mixed_ops.h"

namespace {

const fcDataType_t kTypes[] = {fcBfloat16, fcFloat16, fcFloat32};

void toDevice(void* dst, const std::vector<char>& h) {
  CUDA_REQUIRE(cudaMemcpy(dst, h.data(), h.size(), cudaMemcpyHostToDevice));
}

std::vector<char> fromDevice(const void* src, size_t bytes) {
  std::vector<char> h(bytes);
  CUDA_REQUIRE(cudaMemcpy(h.data(), src, bytes, cudaMemcpyDeviceToHost));
  return h;
}

// Elements [first, first+n) of the pattern as a host buffer (indices of the pattern
// are global, so slices of one logical input can be generated separately).
std::vector<char> pattern(fcDataType_t t, size_t first, size_t n, uint64_t seed, int rank) {
  std::vector<char> h(n * fcTypeSize(t));
  for (size_t i = 0; i < n; ++i) fcStore(h.data(), t, i, float(fcPatternValue(seed, rank, first + i)));
  return h;
}

// Number of elements of `got` (n elements) that differ from want(i).
template <typename Want>
size_t mismatches(const std::vector<char>& got, fcDataType_t t, size_t n, Want want) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += !(fcLoad(got.data(), t, i) == float(want(i)));
  return bad;
}

}  // namespace

TEST_CASE("fcAllReduce: exact sums, one-shot and two-shot sizes, multi-pass, in place, misaligned") {
  const GpuEnv& env = gpuEnv();
  const size_t ws = GpuEnv::kWorkspaceBytes;
  for (fcDataType_t t : kTypes) {
    const size_t es = fcTypeSize(t);
    // Small (one-shot), just past the one-shot limits, just under one full pass of the
    // Lamport two-shot (4 MiB at 4 ranks), odd, 2.5 workspaces (passes), and the same
    // as a multiple of the world size (the copy-engine all-reduce where it runs).
    const std::vector<size_t> counts = {1, 3, 1000, 65537, (256u << 10) / es + 1, (1u << 20) / es + 7,
                                        (4u << 20) / es - 3, 3 * 1000 * 1000 + 1, (5 * ws / 2) / es,
                                        (5 * ws / 2) / es + 3};
    const size_t maxCount = counts.back();
    DeviceBuffer in((maxCount + 8) * es), out((maxCount + 8) * es);
    for (size_t count : counts)
      for (int inPlace = 0; inPlace < 2; ++inPlace)
        for (int misaligned = 0; misaligned < 2; ++misaligned) {
          const uint64_t seed = freshSeed();
          char* src = in.c() + misaligned * es;
          char* dst = inPlace ? src : out.c() + misaligned * es;
          CUDA_REQUIRE(cudaMemset(out.p, 0xff, (maxCount + 8) * es));
          toDevice(src, pattern(t, 0, count, seed, env.rank));
          CUDA_REQUIRE(cudaDeviceSynchronize());
          fcResult_t r = fcAllReduce(src, dst, count, t, fcSum, env.comm, env.streams[0]);
          CUDA_REQUIRE(cudaStreamSynchronize(env.streams[0]));
          INFO(fcTypeName(t) << " count " << count << (inPlace ? " in place" : "")
                             << (misaligned ? " misaligned" : "") << ": " << fcGetLastError(nullptr));
          CHECK(r == fcSuccess);
          CHECK(mismatches(fromDevice(dst, count * es), t, count,
                           [&](size_t i) { return sumOverRanks(seed, env.nranks, i); }) == 0);
        }
  }
}

TEST_CASE("fcReduceScatter: exact block sums, multi-pass, in place, misaligned, zero-copy") {
  const GpuEnv& env = gpuEnv();
  const int W = env.nranks;
  const size_t ws = GpuEnv::kWorkspaceBytes;
  for (fcDataType_t t : kTypes) {
    const size_t es = fcTypeSize(t);
    const std::vector<size_t> counts = {1, 5, 1000, 4097, (1u << 20) / es, (3 * ws / W) / es + 9};
    const size_t maxRc = counts.back();
    DeviceBuffer in((W * maxRc + 8) * es), out((maxRc + 8) * es);
    void* sym = nullptr;
    FC_REQUIRE(fcMemAlloc(env.comm, &sym, W * maxRc * es));
    for (size_t rc : counts)
      for (int mode = 0; mode < 4; ++mode) {  // 0 plain, 1 in place, 2 misaligned, 3 zero-copy
        const uint64_t seed = freshSeed();
        char* src = mode == 3 ? static_cast<char*>(sym) : in.c() + (mode == 2 ? es : 0);
        char* dst = mode == 1 ? src + size_t(env.rank) * rc * es : out.c() + (mode == 2 ? es : 0);
        CUDA_REQUIRE(cudaMemset(out.p, 0xff, (maxRc + 8) * es));
        toDevice(src, pattern(t, 0, W * rc, seed, env.rank));
        CUDA_REQUIRE(cudaDeviceSynchronize());
        fcResult_t r = fcReduceScatter(src, dst, rc, t, fcSum, env.comm, env.streams[1]);
        CUDA_REQUIRE(cudaStreamSynchronize(env.streams[1]));
        INFO(fcTypeName(t) << " recvcount " << rc << " mode " << mode << ": " << fcGetLastError(nullptr));
        CHECK(r == fcSuccess);
        const size_t base = size_t(env.rank) * rc;
        CHECK(mismatches(fromDevice(dst, rc * es), t, rc,
                         [&](size_t i) { return sumOverRanks(seed, W, base + i); }) == 0);
      }
    FC_REQUIRE(fcMemFree(env.comm, sym));
  }
}

TEST_CASE("fcAllGather: exact blocks in rank order, multi-pass, in place, misaligned, zero-copy") {
  const GpuEnv& env = gpuEnv();
  const int W = env.nranks;
  const size_t ws = GpuEnv::kWorkspaceBytes;
  for (fcDataType_t t : kTypes) {
    const size_t es = fcTypeSize(t);
    const std::vector<size_t> counts = {1, 5, 1000, 4097, (1u << 20) / es, (5 * ws / 2) / es + 9};
    const size_t maxSc = counts.back();
    DeviceBuffer in((maxSc + 8) * es), out((W * maxSc + 8) * es);
    void* sym = nullptr;
    FC_REQUIRE(fcMemAlloc(env.comm, &sym, maxSc * es));
    for (size_t sc : counts)
      for (int mode = 0; mode < 4; ++mode) {  // 0 plain, 1 in place, 2 misaligned, 3 zero-copy
        const uint64_t seed = freshSeed();
        char* dst = out.c() + (mode == 2 ? es : 0);
        char* src = mode == 1   ? dst + size_t(env.rank) * sc * es
                    : mode == 3 ? static_cast<char*>(sym)
                                : in.c() + (mode == 2 ? es : 0);
        CUDA_REQUIRE(cudaMemset(out.p, 0xff, (W * maxSc + 8) * es));
        toDevice(src, pattern(t, 0, sc, seed, env.rank));
        CUDA_REQUIRE(cudaDeviceSynchronize());
        fcResult_t r = fcAllGather(src, dst, sc, t, env.comm, env.streams[0]);
        CUDA_REQUIRE(cudaStreamSynchronize(env.streams[0]));
        INFO(fcTypeName(t) << " sendcount " << sc << " mode " << mode << ": " << fcGetLastError(nullptr));
        CHECK(r == fcSuccess);
        CHECK(mismatches(fromDevice(dst, W * sc * es), t, W * sc,
                         [&](size_t i) { return fcPatternValue(seed, int(i / sc), i % sc); }) == 0);
      }
    FC_REQUIRE(fcMemFree(env.comm, sym));
  }
}

TEST_CASE("10,000 mixed collectives back to back on one stream, without host synchronisation") {
  const GpuEnv& env = gpuEnv();
  const MixedOps m(10000, env.nranks);
  DeviceBuffer in(m.inTotal * 2), out(m.outTotal * 2);
  const uint64_t seed = freshSeed();
  toDevice(in.p, pattern(fcBfloat16, 0, m.inTotal, seed, env.rank));
  CUDA_REQUIRE(cudaMemset(out.p, 0xff, m.outTotal * 2));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  size_t failures = 0;
  for (const auto& o : m.ops) failures += m.issue(o, in.c(), out.c(), env.comm, env.streams[1]) != fcSuccess;
  CUDA_REQUIRE(cudaStreamSynchronize(env.streams[1]));
  CHECK(failures == 0);
  CHECK(m.check(fromDevice(out.p, m.outTotal * 2), seed, env.rank, env.nranks) == 0);
}

TEST_CASE("mixed collectives in a CUDA graph, replayed with fresh inputs") {
  const GpuEnv& env = gpuEnv();
  const MixedOps m(60, env.nranks);
  DeviceBuffer in(m.inTotal * 2), out(m.outTotal * 2);
  cudaStream_t s = env.streams[0];
  CUDA_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  size_t failures = 0;
  for (const auto& o : m.ops) failures += m.issue(o, in.c(), out.c(), env.comm, s) != fcSuccess;
  cudaGraph_t graph;
  CUDA_REQUIRE(cudaStreamEndCapture(s, &graph));
  REQUIRE(failures == 0);
  cudaGraphExec_t exec;
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 5; ++replay) {
    const uint64_t seed = freshSeed();
    toDevice(in.p, pattern(fcBfloat16, 0, m.inTotal, seed, env.rank));
    CUDA_REQUIRE(cudaMemset(out.p, 0xff, m.outTotal * 2));
    CUDA_REQUIRE(cudaDeviceSynchronize());
    CUDA_REQUIRE(cudaGraphLaunch(exec, s));
    CUDA_REQUIRE(cudaStreamSynchronize(s));
    INFO("replay " << replay);
    CHECK(m.check(fromDevice(out.p, m.outTotal * 2), seed, env.rank, env.nranks) == 0);
  }
  CUDA_REQUIRE(cudaGraphExecDestroy(exec));
  CUDA_REQUIRE(cudaGraphDestroy(graph));
}
