// fcAllReduceOneShot on real GPUs: exact sums for every dtype, many sizes (odd
// counts, misaligned pointers), in and out of place, poisoned outputs, 10,000
// back-to-back calls, CUDA-graph capture and replay, and argument rejection; and the
// rounding of every all-reduce algorithm.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "fc_data.h"
#include "gpu_env.h"

namespace {

struct DevBuf {
  explicit DevBuf(size_t bytes) : bytes(bytes) { CUDA_REQUIRE(cudaMalloc(&p, bytes)); }
  ~DevBuf() { cudaFree(p); }
  char* c() const { return static_cast<char*>(p); }
  void* p = nullptr;
  size_t bytes;
};

// Uploads and poisoning end with a device synchronisation: the ops under test run
// on non-blocking streams, which are not ordered after the legacy stream, and a
// cudaMemcpy from pageable memory may return before its DMA has landed.

// All-ones bytes are NaN in fp32, fp16 and bf16: an element the op forgot to write
// can never pass for a right answer.
void poison(void* p, size_t bytes) {
  CUDA_REQUIRE(cudaMemset(p, 0xff, bytes));
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

void upload(void* dst, fcDataType_t t, size_t count, uint64_t seed, int rank) {
  std::vector<char> h = fcPatternInput(t, count, seed, rank);
  CUDA_REQUIRE(cudaMemcpy(dst, h.data(), h.size(), cudaMemcpyHostToDevice));
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

std::vector<char> download(const void* src, size_t bytes) {
  std::vector<char> h(bytes);
  CUDA_REQUIRE(cudaMemcpy(h.data(), src, bytes, cudaMemcpyDeviceToHost));
  return h;
}

size_t workspaceCount(fcDataType_t t) { return GpuEnv::kWorkspaceBytes / fcTypeSize(t); }

const fcDataType_t kTypes[] = {fcBfloat16, fcFloat16, fcFloat32};

}  // namespace

TEST_CASE("communicator getters") {
  const GpuEnv& env = gpuEnv();
  int v = -1;
  FC_REQUIRE(fcCommCount(env.comm, &v));
  CHECK(v == env.nranks);
  FC_REQUIRE(fcCommUserRank(env.comm, &v));
  CHECK(v == env.rank);
  FC_REQUIRE(fcCommCuDevice(env.comm, &v));
  CHECK(v == env.device);
}

TEST_CASE("one-shot all-reduce: exact sums over dtypes, sizes, placement and alignment") {
  const GpuEnv& env = gpuEnv();
  cudaStream_t stream = env.streams[0];
  for (fcDataType_t t : kTypes) {
    const size_t es = fcTypeSize(t);
    // 300007 (in fp32) and 700001 (in 16 bits): 1.1-1.4 MiB, where at 2 ranks the Lamport
    // one-shot's CTAs own 640-768 packs and run wide (tuning::lamportWideCtas).
    std::vector<size_t> counts = {1,    2,    3,    5,     7,     8,      9,      15,     16,
                                  17,   31,   33,   255,   256,   1000,   4095,   4096,   4097,
                                  8191, 12345, 65536, 65537, 262147, 300007, 700001, 1 << 20,
                                  (1 << 20) + 3,    workspaceCount(t)};
    const size_t maxCount = counts.back();
    DevBuf in((maxCount + 16) * es), out((maxCount + 16) * es);
    for (size_t count : counts) {
      for (int placement = 0; placement < 2; ++placement) {      // 0: out of place, 1: in place
        for (int misaligned = 0; misaligned < 2; ++misaligned) {  // +1 element: the scalar path
          if (misaligned && count == maxCount) continue;          // would not fit the workspace
          const uint64_t seed = freshSeed();
          char* src = in.c() + misaligned * es;
          char* dst = placement ? src : out.c() + misaligned * es;
          poison(out.p, out.bytes);
          upload(src, t, count, seed, env.rank);
          fcResult_t res = fcAllReduceOneShot(src, dst, count, t, fcSum, env.comm, stream);
          CUDA_REQUIRE(cudaStreamSynchronize(stream));
          CUDA_REQUIRE(cudaGetLastError());
          std::vector<char> got = download(dst, count * es);
          INFO("dtype " << fcTypeName(t) << " count " << count << (placement ? " in place" : " out of place")
                        << (misaligned ? " misaligned" : "") << ": " << fcGetLastError(nullptr));
          CHECK(res == fcSuccess);
          CHECK(fcPatternSumError(got.data(), t, count, seed, env.nranks) == 0.0);
          if (!placement && count < maxCount) {
            // Nothing past the end was written.
            std::vector<char> after = download(dst + count * es, es);
            CHECK(std::isnan(fcLoad(after.data(), t, 0)));
          }
        }
      }
    }
  }
}

TEST_CASE("all-reduce: random inputs are summed in fp32, rounded once, the same on every rank, every algorithm") {
  const GpuEnv& env = gpuEnv();
  // fcAllReduceOneShot, then fcAllReduce at sizes its auto choice gives to the Lamport
  // two-shot (at 2 and 4 ranks; one pass, then two), or the forced algorithm.
  struct Call {
    bool oneShot;
    size_t count;
  };
  // FC_ALLREDUCE_ALGO=oneshot makes fcAllReduce a staged one-shot, which refuses
  // inputs larger than the workspace (documented): check that instead.
  const char* algo = getenv("FC_ALLREDUCE_ALGO");
  const bool forcedOneShot = algo != nullptr && std::string(algo) == "oneshot";
  for (const Call call : {Call{true, 100003}, Call{false, 700001}, Call{false, 3000001}}) {
    for (fcDataType_t t : kTypes) {
      const size_t count = call.count;
      const size_t es = fcTypeSize(t);
      if (forcedOneShot && count * es > GpuEnv::kWorkspaceBytes) {
        DevBuf in(count * es), out(count * es);
        CHECK(fcAllReduce(in.p, out.p, count, t, fcSum, env.comm, nullptr) == fcInvalidArgument);
        continue;
      }
      const uint64_t seed = freshSeed();
      // Every rank draws every rank's normal inputs (rounded to t) from the same seeds.
      std::vector<std::vector<char>> inputs(size_t(env.nranks));
      for (int r = 0; r < env.nranks; ++r) {
        std::mt19937_64 rng(seed + uint64_t(r));
        std::normal_distribution<float> normal(0.f, 1.f);
        inputs[size_t(r)].resize(count * es);
        for (size_t i = 0; i < count; ++i) fcStore(inputs[size_t(r)].data(), t, i, normal(rng));
      }
      DevBuf in(count * es), out(count * es);
      CUDA_REQUIRE(cudaMemcpy(in.p, inputs[size_t(env.rank)].data(), count * es, cudaMemcpyHostToDevice));
      poison(out.p, out.bytes);  // synchronises the device: the upload has landed too
      if (call.oneShot) FC_REQUIRE(fcAllReduceOneShot(in.p, out.p, count, t, fcSum, env.comm, nullptr));
      else FC_REQUIRE(fcAllReduce(in.p, out.p, count, t, fcSum, env.comm, nullptr));
      CUDA_REQUIRE(cudaDeviceSynchronize());
      std::vector<char> got = download(out.p, count * es);
      // One rounding of an (almost) exact sum: at most half an ulp of the output type,
      // plus fp32 accumulation error. A bf16/fp16 accumulator would exceed this.
      const double unit = t == fcFloat32 ? 0x1p-23 : t == fcFloat16 ? 0x1p-10 : 0x1p-7;
      const double tiny = t == fcFloat16 ? 0x1p-24 : 1e-30;
      size_t bad = 0;
      double worst = 0;
      for (size_t i = 0; i < count; ++i) {
        double ref = 0, mag = 0;
        for (int r = 0; r < env.nranks; ++r) {
          double x = fcLoad(inputs[size_t(r)].data(), t, i);
          ref += x;
          mag += std::fabs(x);
        }
        const double ulp = std::max(tiny, std::ldexp(unit, std::ilogb(std::max(std::fabs(ref), 1e-30))));
        const double tol = 0.5 * ulp + env.nranks * 0x1p-24 * mag;
        const double err = std::fabs(double(fcLoad(got.data(), t, i)) - ref);
        worst = std::max(worst, err / ulp);
        if (!(err <= tol)) ++bad;
      }
      INFO((call.oneShot ? "fcAllReduceOneShot" : "fcAllReduce")
           << ", count " << count << ", dtype " << fcTypeName(t) << ": worst error " << worst << " ulp");
      CHECK(bad == 0);
      // Every rank got the same bits (the one-shots sum on every rank: in one order).
      DevBuf all(size_t(env.nranks) * count * es);
      FC_REQUIRE(fcAllGather(out.p, all.p, count, t, env.comm, nullptr));
      CUDA_REQUIRE(cudaDeviceSynchronize());
      const std::vector<char> gathered = download(all.p, all.bytes);
      int differing = 0;
      for (int r = 0; r < env.nranks; ++r)
        differing += memcmp(gathered.data() + size_t(r) * count * es, got.data(), count * es) != 0;
      CHECK(differing == 0);
    }
  }
}

namespace {

// Slices of one big buffer for many calls: varied counts, 16-byte aligned starts
// except every 7th call (one element off), and a one-element gap after each slice
// that must stay poisoned.
struct Slices {
  std::vector<size_t> offset, count;
  size_t total = 0;
  Slices(size_t calls, size_t es) {
    const size_t pattern[] = {1, 7, 64, 129, 1000, 4097, 2049, 333, 8192, 31, 16384 + 5};
    const size_t perPack = 16 / es;
    for (size_t k = 0; k < calls; ++k) {
      size_t start = (total + perPack - 1) / perPack * perPack + (k % 7 == 6 ? 1 : 0);
      offset.push_back(start);
      count.push_back(pattern[k % (sizeof pattern / sizeof pattern[0])]);
      total = start + count.back() + 1;
    }
  }
};

// Check every slice's exact sum and that every gap is still poisoned.
void checkSlices(const Slices& s, const std::vector<char>& got, fcDataType_t t, uint64_t seed,
                 int nranks) {
  size_t wrong = 0, overwritten = 0;
  std::vector<bool> covered(s.total, false);
  for (size_t k = 0; k < s.offset.size(); ++k)
    for (size_t i = 0; i < s.count[k]; ++i) covered[s.offset[k] + i] = true;
  for (size_t g = 0; g < s.total; ++g) {
    const float v = fcLoad(got.data(), t, g);
    if (!covered[g]) {
      overwritten += !std::isnan(v);
      continue;
    }
    int want = 0;
    for (int r = 0; r < nranks; ++r) want += fcPatternValue(seed, r, g);
    wrong += !(v == float(want));
  }
  CHECK(wrong == 0);
  CHECK(overwritten == 0);
}

}  // namespace

TEST_CASE("one-shot all-reduce: 10,000 back-to-back calls without host synchronisation") {
  const GpuEnv& env = gpuEnv();
  const fcDataType_t t = fcBfloat16;
  const size_t es = fcTypeSize(t);
  const Slices s(10000, es);
  DevBuf in(s.total * es), out(s.total * es);
  const uint64_t seed = freshSeed();
  upload(in.p, t, s.total, seed, env.rank);
  poison(out.p, out.bytes);
  cudaStream_t stream = env.streams[1];
  size_t failures = 0;
  for (size_t k = 0; k < s.offset.size(); ++k)
    failures += fcAllReduceOneShot(in.c() + s.offset[k] * es, out.c() + s.offset[k] * es, s.count[k],
                                   t, fcSum, env.comm, stream) != fcSuccess;
  CUDA_REQUIRE(cudaStreamSynchronize(stream));
  CUDA_REQUIRE(cudaGetLastError());
  CHECK(failures == 0);
  checkSlices(s, download(out.p, s.total * es), t, seed, env.nranks);
}

TEST_CASE("one-shot all-reduce: a CUDA graph of 100 calls replayed 10 times") {
  const GpuEnv& env = gpuEnv();
  for (fcDataType_t t : {fcBfloat16, fcFloat32}) {
    const size_t es = fcTypeSize(t);
    const Slices s(100, es);
    DevBuf in(s.total * es), out(s.total * es);
    cudaStream_t stream = env.streams[0];
    CUDA_REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    size_t failures = 0;
    for (size_t k = 0; k < s.offset.size(); ++k)
      failures += fcAllReduceOneShot(in.c() + s.offset[k] * es, out.c() + s.offset[k] * es,
                                     s.count[k], t, fcSum, env.comm, stream) != fcSuccess;
    cudaGraph_t graph;
    CUDA_REQUIRE(cudaStreamEndCapture(stream, &graph));
    REQUIRE(failures == 0);
    cudaGraphExec_t exec;
    CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 10; ++replay) {
      // New inputs each replay: a replay that reused stale data or stale epochs fails.
      const uint64_t seed = freshSeed();
      upload(in.p, t, s.total, seed, env.rank);
      poison(out.p, out.bytes);
      CUDA_REQUIRE(cudaGraphLaunch(exec, stream));
      CUDA_REQUIRE(cudaStreamSynchronize(stream));
      INFO("dtype " << fcTypeName(t) << " replay " << replay);
      checkSlices(s, download(out.p, s.total * es), t, seed, env.nranks);
    }
    CUDA_REQUIRE(cudaGraphExecDestroy(exec));
    CUDA_REQUIRE(cudaGraphDestroy(graph));
  }
}

TEST_CASE("one-shot all-reduce: bad arguments are rejected and touch nothing") {
  const GpuEnv& env = gpuEnv();
  const size_t count = 1024;
  DevBuf in(count * 4 + 64), out(count * 4 + 64);
  poison(out.p, out.bytes);
  auto rejected = [&](fcResult_t res, fcResult_t want) {
    INFO(fcGetLastError(nullptr));
    CHECK(res == want);
    CHECK(strlen(fcGetLastError(nullptr)) > 0);
  };
  rejected(fcAllReduceOneShot(nullptr, out.p, count, fcFloat32, fcSum, env.comm, nullptr), fcInvalidArgument);
  rejected(fcAllReduceOneShot(in.p, nullptr, count, fcFloat32, fcSum, env.comm, nullptr), fcInvalidArgument);
  rejected(fcAllReduceOneShot(in.p, out.p, count, fcDataType_t(3), fcSum, env.comm, nullptr), fcInvalidArgument);
  rejected(fcAllReduceOneShot(in.p, out.p, count, fcFloat32, fcRedOp_t(1), env.comm, nullptr), fcInvalidArgument);
  rejected(fcAllReduceOneShot(in.c() + 2, out.p, count, fcFloat32, fcSum, env.comm, nullptr), fcInvalidArgument);
  rejected(fcAllReduceOneShot(in.p, in.c() + 16, count, fcFloat32, fcSum, env.comm, nullptr), fcInvalidArgument);
  rejected(fcAllReduceOneShot(in.p, out.p, SIZE_MAX / 2, fcFloat32, fcSum, env.comm, nullptr), fcInvalidArgument);
  const size_t tooMany = workspaceCount(fcFloat32) + 1;
  fcResult_t res = fcAllReduceOneShot(in.p, out.p, tooMany, fcFloat32, fcSum, env.comm, nullptr);
  rejected(res, fcInvalidArgument);
  CHECK(std::string(fcGetLastError(nullptr)).find("limit") != std::string::npos);
  // count 0 is a successful no-op.
  CHECK(fcAllReduceOneShot(in.p, out.p, 0, fcFloat32, fcSum, env.comm, nullptr) == fcSuccess);
  CUDA_REQUIRE(cudaDeviceSynchronize());
  std::vector<char> got = download(out.p, out.bytes);
  CHECK(std::all_of(got.begin(), got.end(), [](char c) { return c == char(0xff); }));
}
