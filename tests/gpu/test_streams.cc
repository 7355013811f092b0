// Streams as real clients use them: any number, created at any time, with no
// dependencies between them, several threads taking turns, and graph capture on a
// side stream with forked streams inside it, replayed while eager ops run. The
// library runs a communicator's ops in issue order (include/fusedcomm.h), so every
// result must be exact, and its memory must not grow with the number of streams.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "fc_data.h"
#include "gpu_env.h"
#include "mixed_ops.h"

namespace {

// Buffers for one MixedOps run, with fresh inputs and poisoned outputs.
struct MixedRun {
  const MixedOps& m;
  DeviceBuffer in, out;
  uint64_t seed = 0;
  explicit MixedRun(const MixedOps& ops) : m(ops), in(ops.inTotal * 2), out(ops.outTotal * 2) {}
  void prepare(int rank) {
    seed = freshSeed();
    const std::vector<char> h = fcPatternInput(fcBfloat16, m.inTotal, seed, rank);
    CUDA_REQUIRE(cudaMemcpy(in.p, h.data(), h.size(), cudaMemcpyHostToDevice));
    CUDA_REQUIRE(cudaMemset(out.p, 0xff, m.outTotal * 2));
    CUDA_REQUIRE(cudaDeviceSynchronize());
  }
  size_t wrong(int rank, int W) const {
    std::vector<char> h(m.outTotal * 2);
    CUDA_REQUIRE(cudaMemcpy(h.data(), out.p, h.size(), cudaMemcpyDeviceToHost));
    return m.check(h, seed, rank, W);
  }
};

size_t freeDeviceMemory() {
  size_t free = 0, total = 0;
  CUDA_REQUIRE(cudaMemGetInfo(&free, &total));
  return free;
}

}  // namespace

TEST_CASE("any number of streams with no dependencies between them: a fresh stream per call, 16 round-robin, "
          "several threads' streams; memory does not grow with them") {
  const GpuEnv& env = gpuEnv();
  const MixedOps m(600, env.nranks);
  MixedRun run(m);
  size_t failures = 0;
  const size_t free0 = freeDeviceMemory();

  SECTION("a fresh stream per call, destroyed right after the call is issued") {
    run.prepare(env.rank);
    for (const auto& o : m.ops) {
      cudaStream_t s;
      CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      failures += m.issue(o, run.in.c(), run.out.c(), env.comm, s) != fcSuccess;
      CUDA_REQUIRE(cudaStreamDestroy(s));  // its work still runs to the end
    }
  }
  SECTION("16 streams round-robin, and the legacy default stream") {
    run.prepare(env.rank);
    std::vector<cudaStream_t> streams(16);
    for (cudaStream_t& s : streams) CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (size_t k = 0; k < m.ops.size(); ++k)
      failures += m.issue(m.ops[k], run.in.c(), run.out.c(), env.comm, k % 17 == 16 ? nullptr : streams[k % 17]) !=
                  fcSuccess;
    CUDA_REQUIRE(cudaDeviceSynchronize());
    for (cudaStream_t s : streams) CUDA_REQUIRE(cudaStreamDestroy(s));
  }
  SECTION("four threads with a stream each, taking turns (the communicator is not thread-safe)") {
    run.prepare(env.rank);
    std::mutex turn;
    size_t next = 0;
    std::vector<std::thread> threads;
    std::vector<size_t> threadFailures(4, 0);
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        cudaSetDevice(env.device);
        cudaStream_t s;
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
          ++threadFailures[size_t(t)];
          return;
        }
        for (;;) {
          std::lock_guard<std::mutex> lock(turn);
          if (next >= m.ops.size()) break;
          // Thread t issues op k only when k % 4 == t: the same order on every rank.
          if (next % 4 != size_t(t)) continue;
          threadFailures[size_t(t)] += m.issue(m.ops[next], run.in.c(), run.out.c(), env.comm, s) != fcSuccess;
          ++next;
        }
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
      });
    for (std::thread& th : threads) th.join();
    for (size_t f : threadFailures) failures += f;
  }
  CUDA_REQUIRE(cudaDeviceSynchronize());
  INFO(fcGetLastError(nullptr));
  CHECK(failures == 0);
  CHECK(run.wrong(env.rank, env.nranks) == 0);
  fcResult_t async = fcInternalError;
  FC_REQUIRE(fcCommGetAsyncError(env.comm, &async));
  CHECK(async == fcSuccess);
  // Nothing per stream: hundreds of streams later the device has about as much free
  // memory (a channel per stream would take its 8 MiB workspace, 9 * nranks MiB of
  // push buffers and 32 MiB of cuBLASLt workspace each: GiBs here). The driver's own
  // per-thread and per-stream allocations come and go in 2 MiB pages (8 MiB seen).
  const long long grown = (long long)free0 - (long long)freeDeviceMemory();
  INFO("device memory taken during the section: " << grown << " bytes");
  // Ranks sharing one GPU (FC_SHARE_GPU=1) see each other's allocations come and go.
  const char* share = getenv("FC_SHARE_GPU");
  if (share == nullptr || std::string(share) != "1") CHECK(grown < (32ll << 20));
}

TEST_CASE("graph capture on a side stream in global mode, ops on streams forked inside the capture, replayed while "
          "eager ops run on another stream") {
  const GpuEnv& env = gpuEnv();
  const MixedOps m(60, env.nranks);
  MixedRun eager(m), captured(m);
  // An eager warm-up on one stream, then the capture on a new one (as torch.cuda.graph
  // does): nothing ties them together.
  cudaStream_t warm, side, forked, replay, other;
  for (cudaStream_t* s : {&warm, &side, &forked, &replay, &other})
    CUDA_REQUIRE(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
  eager.prepare(env.rank);
  size_t failures = 0;
  for (const auto& o : m.ops) failures += m.issue(o, eager.in.c(), eager.out.c(), env.comm, warm) != fcSuccess;

  cudaEvent_t fork, join;
  CUDA_REQUIRE(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CUDA_REQUIRE(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  CUDA_REQUIRE(cudaStreamBeginCapture(side, cudaStreamCaptureModeGlobal));
  CUDA_REQUIRE(cudaEventRecord(fork, side));
  CUDA_REQUIRE(cudaStreamWaitEvent(forked, fork, 0));  // `forked` joins the capture
  for (size_t k = 0; k < m.ops.size(); ++k)
    failures += m.issue(m.ops[k], captured.in.c(), captured.out.c(), env.comm, k % 2 ? forked : side) != fcSuccess;
  CUDA_REQUIRE(cudaEventRecord(join, forked));
  CUDA_REQUIRE(cudaStreamWaitEvent(side, join, 0));
  cudaGraph_t graph;
  CUDA_REQUIRE(cudaStreamEndCapture(side, &graph));
  INFO(fcGetLastError(nullptr));
  REQUIRE(failures == 0);
  CUDA_REQUIRE(cudaDeviceSynchronize());
  CHECK(eager.wrong(env.rank, env.nranks) == 0);
  cudaGraphExec_t exec;
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  // With two channels (the default) the replay and the eager ops need no dependency:
  // they use separate channels. With FC_CHANNELS=1 they share one, and the caller
  // must order them (include/fusedcomm.h): then the eager ops wait for the replay.
  const char* channels = getenv("FC_CHANNELS");
  const bool shared = channels != nullptr && std::string(channels) == "1";
  cudaEvent_t replayed;
  CUDA_REQUIRE(cudaEventCreateWithFlags(&replayed, cudaEventDisableTiming));
  for (int r = 0; r < 5; ++r) {
    captured.prepare(env.rank);
    eager.prepare(env.rank);
    CUDA_REQUIRE(cudaGraphLaunch(exec, replay));
    if (shared) {
      CUDA_REQUIRE(cudaEventRecord(replayed, replay));
      CUDA_REQUIRE(cudaStreamWaitEvent(other, replayed, 0));
    }
    for (const auto& o : m.ops) failures += m.issue(o, eager.in.c(), eager.out.c(), env.comm, other) != fcSuccess;
    CUDA_REQUIRE(cudaDeviceSynchronize());
    INFO("replay " << r);
    CHECK(failures == 0);
    CHECK(captured.wrong(env.rank, env.nranks) == 0);
    CHECK(eager.wrong(env.rank, env.nranks) == 0);
  }
  fcResult_t async = fcInternalError;
  FC_REQUIRE(fcCommGetAsyncError(env.comm, &async));
  CHECK(async == fcSuccess);
  CUDA_REQUIRE(cudaGraphExecDestroy(exec));
  CUDA_REQUIRE(cudaGraphDestroy(graph));
  CUDA_REQUIRE(cudaEventDestroy(fork));
  CUDA_REQUIRE(cudaEventDestroy(join));
  CUDA_REQUIRE(cudaEventDestroy(replayed));
  for (cudaStream_t s : {warm, side, forked, replay, other}) CUDA_REQUIRE(cudaStreamDestroy(s));
}
