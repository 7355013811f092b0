// fc_fault_tests: failure and lifecycle scenarios, one per run, under tools/fcrun
// (tests/gpu/run-fault-tests runs them all and checks the outcome). Each rank prints
// "fault <scenario>: rank R: PASS|FAIL ..." and exits 0 on PASS.
//
// Any world size from 2; "the victim" is rank min(2, W-1), the last rank aborts.
//   skip     rank 1 skips one of 20 all-reduces: the others get fcTimeout
//   kill     the victim SIGKILLs itself in a loop of 1000: the others get fcTimeout
//   kill-ce  the same in a loop of copy-engine reduce-scatters (their waits are the
//            barrier kernels between the transfers)
//   kill-lamport2  the same in a loop of Lamport two-shot all-reduces of two passes
//            (their waits poll the pushed data)
//   kill-agmm  the same in a loop of fcAllGatherMatmul on the GEMM engine (its waits:
//            the GEMM's tile rows for the shards the copy engine pulls)
//   kill-mmrs  the same in a loop of fcMatmulReduceScatter on the GEMM engine (its
//            waits: the gates before the pulls, for a peer's tiles of our block)
//   kill-mmar  the same in a loop of fcMatmulAllReduce (one decode row: the one
//            kernel's waits for the peers' tiles; FC_MMAR_ALGO=decode: the decode
//            engine's rows kernel's; unfused: the Lamport one-shot's). The survivors'
//            errors name fcMatmulAllReduce whichever kernel waited (run-fault-tests)
//   abort    the last rank calls fcCommAbort in a loop of 1000: the others fail fast
//   mismatch rank 1 calls fcBarrier where the others call fcAllReduceOneShot on 8 MiB
//            (above the Lamport limit: the barrier one-shot): every rank fails fast
//            (the op signature in the flags differs)
//   mismatch-count   on the barrier-free (Lamport) all-reduce, rank 1 passes 4007
//            elements where the others pass 4000
//   mismatch-dtype   the same with fp16 where the others pass fp32
//   mismatch-kind    rank 1's count (4 MiB) takes the Lamport two-shot where the
//            others' (256 KiB) take the one-shot
//   mismatch-mmrs    rank 1 calls fcMatmulReduceScatter with another N
//   mismatch-norm    rank 1 calls fcAllReduceResidualRMSNorm with rows twice as long
//            (the same element count, so only the shape in the call header differs)
//   mismatch-mmar    rank 1 calls fcMatmulAllReduce with another K (the same M x N
//            output: only the shape in the Lamport call header differs)
//   mismatch-mmar-align   rank 1's C is not 16-byte aligned, so that it takes the GEMM,
//            then the all-reduce where the others take the one decode kernel
//   mismatch-agmm   rank 1 passes fcAllGatherMatmul an Agathered where the others pass
//            NULL (run with FC_AGMM_ALGO=engine FC_AGMM_AGATHERED=front: the others'
//            shards are pushed, rank 1's staged and pulled; only the form in the
//            barrier's signature differs. With the default, Agathered filled beside
//            the GEMM, both forms push alike and nothing is mismatched)
//            In the mismatch scenarios every rank fails fast: with fcInvalidUsage
//            naming both calls, or fcRemoteError when a peer's report reached it first;
//            at least one rank names both calls (run-fault-tests checks).
//   cycles   N init/destroy cycles (FC_CYCLES, default 1000) leak no fds, device
//            memory or address-space mappings
//   hosts    the ranks split into fake hosts of FC_RANKS_PER_HOST ranks (default W/2,
//            at least 1) by FC_HOST_ID: a communicator over all ranks is refused on
//            every rank at once (fcInvalidUsage naming the hosts, no descriptor left
//            open, its rendezvous name free again); one per host works (an all-reduce
//            over the host's ranks, exact). 4 ranks on 2 GPUs: FC_SHARE_GPU=1.
//   initall  fcCommInitAll over every visible GPU in one process (run with -n 1; with
//            FC_SHARE_GPU=1 and one GPU, two ranks on it): all-reduce, copy-engine
//            reduce-scatter, staged fcMatmulReduceScatter, checked exactly (one
//            thread issues them: FC_INITALL_ORDER=rank, the default, rank by rank;
//            =op, op by op; FC_INITALL_OPS picks and orders them, e.g. "RM")
//
// Survivors must see the error within FC_TIMEOUT_MS + 2 s of starting the loop.
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "fc_data.h"
#include "fc_env.h"
#include "fusedcomm.h"

namespace {

using Clock = std::chrono::steady_clock;

int g_rank = 0, g_nranks = 1;
const char* g_scenario = "";
bool g_mmrsEngine = false;  // kill-mmrs: fcMatmulReduceScatter on the GEMM engine
// Where faultLoop's time limit counts from: its start, or where a fault callback moved it.
Clock::time_point g_since;

// The rank that dies in the kill scenarios.
int victim() { return g_nranks > 2 ? 2 : g_nranks - 1; }

int report(bool pass, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
int report(bool pass, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("fault %s: rank %d: %s %s\n", g_scenario, g_rank, pass ? "PASS" : "FAIL", msg);
  fflush(stdout);
  return pass ? 0 : 1;
}

#define CHECK_CUDA(call)                                                               \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) return report(false, "%s: %s", #call, cudaGetErrorString(e_)); \
  } while (0)
#define CHECK_FC(call)                                                                      \
  do {                                                                                      \
    fcResult_t r_ = (call);                                                                 \
    if (r_ != fcSuccess)                                                                    \
      return report(false, "%s: %s: %s", #call, fcGetErrorString(r_), fcGetLastError(nullptr)); \
  } while (0)

uint64_t timeoutMs() { return uint64_t(fcEnvInt("FC_TIMEOUT_MS", 120000)); }

// What one call of a loop passes (a fault may change it on one rank).
struct Call {
  size_t count;
  fcDataType_t dtype;
  size_t n;  // fcMatmulReduceScatter's N; fcAllReduceResidualRMSNorm's hidden; fcMatmulAllReduce's K
  bool gathered = false;  // fcAllGatherMatmul with an Agathered
};

// Issue `calls` ops; `fault(k, stream, call)` runs before call k, may change the
// call's arguments, and returns false to skip it.
// Returns the communicator's async error after synchronising, and the elapsed time.
// count: 1 << 19 floats (2 MiB, above the Lamport limit) takes the barrier one-shot,
// whose flags carry op signatures; 1 << 14 (64 KiB) the Lamport one-shot (no flags:
// its waits poll the data).
// op: fcAllReduceOneShot(buf, buf, count), fcAllReduce(buf, buf, count) or
// fcReduceScatter(buf, buf + rank * count/W, count/W).
enum class FaultOp {
  OneShot,
  AllReduce,
  ReduceScatter,
  MatmulReduceScatter,
  AllGatherMatmul,
  AllReduceNorm,
  MatmulAllReduce
};
template <typename Fault>
int faultLoop(fcComm_t comm, int calls, Fault fault, bool expectError, size_t count = 1 << 19,
              FaultOp op = FaultOp::OneShot) {
  float* buf;
  const size_t bytes = (16 * count + 8192) * sizeof(float);  // room for mismatched calls' larger counts
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&buf), bytes));
  CHECK_CUDA(cudaMemset(buf, 0, bytes));
  const size_t rc = count / size_t(g_nranks);
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK_CUDA(cudaDeviceSynchronize());
  g_since = Clock::now();
  fcResult_t firstError = fcSuccess;
  for (int k = 0; k < calls && firstError == fcSuccess; ++k) {
    Call call{count, fcFloat32, 64};
    if (!fault(k, s, call)) continue;
    switch (op) {
      case FaultOp::OneShot:
        firstError = fcAllReduceOneShot(buf, buf, call.count, call.dtype, fcSum, comm, s);
        break;
      case FaultOp::AllReduce: firstError = fcAllReduce(buf, buf, call.count, call.dtype, fcSum, comm, s); break;
      case FaultOp::ReduceScatter:
        firstError = fcReduceScatter(buf, buf + size_t(g_rank) * rc, rc, fcFloat32, fcSum, comm, s);
        break;
      case FaultOp::AllGatherMatmul: {
        // A [512, 512] per rank, B [512, 512] (fcOpT), C [512 W, 512] (bf16), then
        // Agathered [512 W, 512] where the call has one.
        const size_t ms = 512, K = 512, N = 512, M = ms * size_t(g_nranks);
        char* base = reinterpret_cast<char*>(buf);
        char* C = base + (ms + N) * K * 2;
        firstError = fcAllGatherMatmul(base, base + ms * K * 2, C, call.gathered ? C + M * N * 2 : nullptr, M, N, K,
                                       fcOpT, fcBfloat16, comm, s);
        break;
      }
      case FaultOp::AllReduceNorm: {
        // count fp32 elements as rows of call.n: sendbuff, residual, normOut in turn,
        // residualOut in place; the weight (call.n elements) after them.
        const size_t tokens = call.count / call.n;
        firstError = fcAllReduceResidualRMSNorm(buf, buf + count, buf + 3 * count, buf + count, buf + 2 * count,
                                                tokens, call.n, 1e-6f, fcFloat32, comm, s);
        break;
      }
      case FaultOp::MatmulAllReduce: {
        // A [1, K] and B [512, K] from the front of buf, C [1, 512] behind them (bf16);
        // C 2 bytes further on when call.count is odd (mismatch-mmar-align).
        const size_t M = 1, N = 512, K = call.n;
        char* base = reinterpret_cast<char*>(buf);
        firstError = fcMatmulAllReduce(base, base + M * K * 2, base + (M + N) * K * 2 + (call.count % 2) * 2, M, N,
                                       K, fcOpT, fcBfloat16, comm, s);
        break;
      }
      case FaultOp::MatmulReduceScatter: {
        // A [M, K] and B [N, K] from the front of buf, C [M/W, N] behind them (bf16);
        // 128 rows per rank on the GEMM engine (its blocks are whole tiles).
        const size_t M = (g_mmrsEngine ? 128 : 64) * size_t(g_nranks), K = 64;
        char* base = reinterpret_cast<char*>(buf);
        firstError = fcMatmulReduceScatter(base, base + M * K * 2, base + (M + call.n) * K * 2, M, call.n, K,
                                           fcOpT, fcBfloat16, comm, s);
        break;
      }
    }
  }
  const cudaError_t syncErr = cudaStreamSynchronize(s);
  fcResult_t async = fcInternalError;
  fcCommGetAsyncError(comm, &async);
  const std::string why = fcGetLastError(nullptr);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - g_since).count();
  cudaStreamDestroy(s);
  cudaFree(buf);
  if (syncErr != cudaSuccess) return report(false, "stream sync: %s", cudaGetErrorString(syncErr));
  const fcResult_t seen = async != fcSuccess ? async : firstError;
  if (!expectError)
    return report(seen == fcSuccess, "no error expected: got %s after %.0f ms", fcGetErrorString(seen), ms);
  const double limit = double(timeoutMs()) + 2000.0;
  return report(seen != fcSuccess && ms < limit, "%s after %.0f ms (limit %.0f ms): %s",
                fcGetErrorString(seen), ms, limit, why.c_str());
}

int countFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

int countMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) ++n;
  return n;
}

// One init + all-reduce + destroy; reusing one unique id for communicators that
// exist one after another is fine (the rendezvous socket is closed in between).
int cycle(const fcUniqueId& id) {
  fcComm_t comm;
  CHECK_FC(fcCommInitRank(&comm, g_nranks, id, g_rank));
  float* buf;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&buf), 256 * sizeof(float)));
  std::vector<float> h(256, float(g_rank + 1));
  CHECK_CUDA(cudaMemcpy(buf, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_FC(fcAllReduceOneShot(buf, buf, 256, fcFloat32, fcSum, comm, nullptr));
  CHECK_CUDA(cudaMemcpy(h.data(), buf, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaFree(buf));
  CHECK_FC(fcCommDestroy(comm));
  const float want = float(g_nranks * (g_nranks + 1) / 2);
  for (float v : h)
    if (v != want) return report(false, "cycle all-reduce gave %g, want %g", v, want);
  return 0;
}

int cycles(const fcUniqueId& id) {
  const int n = fcEnvInt("FC_CYCLES", 1000);
  for (int i = 0; i < 10; ++i)  // warm-up: cudart and driver allocate lazily
    if (cycle(id) != 0) return 1;
  size_t free0, total;
  CHECK_CUDA(cudaMemGetInfo(&free0, &total));
  const int fds0 = countFds(), maps0 = countMappings();
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i)
    if (cycle(id) != 0) return 1;
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  // Device memory may fluctuate by the driver's own pools; a leak of one heap per
  // cycle would be n * 2 MiB at least. Our last heap's memory is freed only when the
  // peers, which may still be destroying their last communicator, have unmapped it
  // (measured once: exactly one heap, 66 MiB, still held): allow them 5 s.
  size_t free1 = 0;
  long long lost = 0;
  for (int wait = 0; wait < 50; ++wait) {
    CHECK_CUDA(cudaMemGetInfo(&free1, &total));
    lost = (long long)free0 - (long long)free1;
    if (lost < (16ll << 20)) break;
    usleep(100000);
  }
  const int fds1 = countFds(), maps1 = countMappings();
  const bool ok = fds1 == fds0 && lost < (16ll << 20) && maps1 <= maps0 + 4;
  return report(ok, "%d cycles in %.1f s: fds %d -> %d, device memory free %zu -> %zu (%lld bytes lost), "
                "mappings %d -> %d",
                n, s, fds0, fds1, free0, free1, lost, maps0, maps1);
}

// The multi-node rule on one machine, with hosts faked by FC_HOST_ID (scenario "hosts").
int hosts(const fcUniqueId& worldId) {
  const int per = fcEnvInt("FC_RANKS_PER_HOST", g_nranks >= 2 ? g_nranks / 2 : 1);
  if (per < 1 || g_nranks % per != 0 || g_nranks / per < 2)
    return report(false, "%d ranks do not make 2 or more hosts of %d (FC_RANKS_PER_HOST)", g_nranks, per);
  const int host = g_rank / per, local = g_rank % per;
  // The ids travel through a communicator of all ranks made before any rank fakes its
  // host: rank 0's for all ranks (slot 0), each host's first rank's for its host (slot 1).
  const char* launched = getenv("FC_HOST_ID");
  const std::string oneHost = launched ? launched : "";
  fcComm_t world;
  CHECK_FC(fcCommInitRank(&world, g_nranks, worldId, g_rank));
  fcUniqueId made[2];
  memset(made, 0, sizeof made);
  if (g_rank == 0) CHECK_FC(fcGetUniqueId(&made[0]));
  if (local == 0) CHECK_FC(fcGetUniqueId(&made[1]));
  constexpr size_t kBytes = sizeof made;  // one float per byte: an exact all-gather
  std::vector<float> bytes(kBytes * size_t(g_nranks));
  for (size_t i = 0; i < kBytes; ++i) bytes[i] = float(uint8_t(reinterpret_cast<const char*>(made)[i]));
  float* d;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&d), bytes.size() * sizeof(float)));
  float* mine = d + size_t(g_rank) * kBytes;
  CHECK_CUDA(cudaMemcpy(mine, bytes.data(), kBytes * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_FC(fcAllGather(mine, d, kBytes, fcFloat32, world, nullptr));
  CHECK_CUDA(cudaMemcpy(bytes.data(), d, bytes.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaFree(d));
  CHECK_FC(fcCommDestroy(world));
  fcUniqueId all, ours;  // the communicator over every rank; our host's
  for (size_t i = 0; i < sizeof all; ++i) {
    all.internal[i] = char(uint8_t(bytes[i]));
    ours.internal[i] = char(uint8_t(bytes[size_t(host * per) * kBytes + sizeof all + i]));
  }

  // Over every rank: refused, on every rank, right after the rendezvous.
  const std::string me = "fake-host-" + std::to_string(host);
  setenv("FC_HOST_ID", me.c_str(), 1);
  const int fds0 = countFds();
  fcComm_t comm = reinterpret_cast<fcComm_t>(&all);  // must come back NULL
  const auto t0 = Clock::now();
  const fcResult_t refused = fcCommInitRank(&comm, g_nranks, all, g_rank);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const std::string why = fcGetLastError(nullptr);
  const int fds1 = countFds();
  const bool namesHosts = why.find("'fake-host-0'") != std::string::npos &&
                          why.find("'fake-host-1'") != std::string::npos && why.find("NCCL") != std::string::npos;
  if (refused != fcInvalidUsage || comm != nullptr || !namesHosts || ms > double(timeoutMs()) || fds1 != fds0)
    return report(false, "over all ranks: %s after %.0f ms (want invalid usage, at once), comm %p, fds %d -> %d: %s",
                  fcGetErrorString(refused), ms, static_cast<void*>(comm), fds0, fds1, why.c_str());

  // One per host: an all-reduce over its ranks.
  fcComm_t node;
  CHECK_FC(fcCommInitRank(&node, per, ours, local));
  float* buf;
  std::vector<float> h(256, float(g_rank + 1));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&buf), h.size() * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(buf, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_FC(fcAllReduce(buf, buf, h.size(), fcFloat32, fcSum, node, nullptr));
  CHECK_CUDA(cudaMemcpy(h.data(), buf, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaFree(buf));
  CHECK_FC(fcCommDestroy(node));
  const float want = float(per * (host * per + 1) + per * (per - 1) / 2);  // ranks host*per .. +per-1, plus 1 each
  size_t wrong = 0;
  for (float v : h) wrong += v != want;

  // The refused id again, every rank declaring one host: nothing of the refusal holds
  // its rendezvous name (rank 0 could not listen on it).
  if (oneHost.empty()) unsetenv("FC_HOST_ID");
  else setenv("FC_HOST_ID", oneHost.c_str(), 1);
  CHECK_FC(fcCommInitRank(&comm, g_nranks, all, g_rank));
  CHECK_FC(fcCommDestroy(comm));
  return report(wrong == 0, "host %d's all-reduce: %zu of %zu wrong (want %g); all ranks: refused in %.0f ms (fds %d "
                "-> %d), then served as one host; the refusal: \"%s\"",
                host, wrong, h.size(), double(want), ms, fds0, fds1, why.c_str());
}

// fcCommInitAll over every visible GPU, or (FC_SHARE_GPU=1 with one GPU) two ranks on
// GPU 0, in one process; one thread drives every rank (launches are asynchronous, so
// every rank's work is in flight before any of it has to finish). Besides the
// lifecycle, the run gives compute-sanitizer one process that sees every rank's
// writes (tools/gpu-check sanitize runs it under initcheck): the all-reduce, the
// copy-engine reduce-scatter, and fcMatmulReduceScatter on its staged path (partials
// past fcReduceScatter's copy-engine crossover), each checked exactly.
struct InitAllRank {
  fcComm_t comm = nullptr;
  int dev = 0;
  cudaStream_t stream = nullptr;
  float *ar = nullptr, *rsIn = nullptr, *rsOut = nullptr;
  void *A = nullptr, *B = nullptr, *C = nullptr;
};

// The staged fcMatmulReduceScatter's shape: kMmRows rows per rank, so that from 2 ranks
// the partials (M x N bf16, 17 MB per rank) pass the 32 MiB crossover; entries in
// {-1, 0, 1} keep every sum (at most W * kMmK = 256 in magnitude at 8 ranks) exact in
// bf16.
constexpr size_t kMmRows = 2048, kMmN = 4160, kMmK = 32;
float ternary(uint64_t seed, int rank, size_t i) { return float((fcPatternValue(seed, rank, i) + 9) % 3 - 1); }

int initAll() {
  int ndev = 0;
  CHECK_CUDA(cudaGetDeviceCount(&ndev));
  const bool share = fcEnvInt("FC_SHARE_GPU", 0) == 1;
  const int W = ndev > 1 ? ndev : share ? 2 : 1;
  // The paths under test, whatever the sizes' automatic choice.
  setenv("FC_REDUCE_SCATTER_ALGO", "ce", 1);
  setenv("FC_MMRS_ALGO", "unfused", 1);
  std::vector<int> devs(static_cast<size_t>(W));
  for (int d = 0; d < W; ++d) devs[size_t(d)] = ndev > 1 ? d : 0;
  std::vector<fcComm_t> comms(static_cast<size_t>(W), nullptr);
  CHECK_FC(fcCommInitAll(comms.data(), W, devs.data()));
  const size_t count = 4097, rc = 1 << 20;  // all-reduce; reduce-scatter block (4 MiB)
  const size_t ms = kMmRows, mmM = ms * size_t(W);  // fcMatmulReduceScatter's M
  std::vector<InitAllRank> ranks(static_cast<size_t>(W));
  for (int d = 0; d < W; ++d) {
    InitAllRank& r = ranks[size_t(d)];
    r.comm = comms[size_t(d)];
    r.dev = devs[size_t(d)];
    CHECK_CUDA(cudaSetDevice(r.dev));
    int rank = -1, dev = -1;
    CHECK_FC(fcCommUserRank(r.comm, &rank));
    CHECK_FC(fcCommCuDevice(r.comm, &dev));
    if (rank != d || dev != r.dev) return report(false, "comm %d has rank %d on device %d", d, rank, dev);
    CHECK_CUDA(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&r.ar), count * sizeof(float)));
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&r.rsIn), size_t(W) * rc * sizeof(float)));
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&r.rsOut), rc * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&r.A, mmM * kMmK * 2));
    CHECK_CUDA(cudaMalloc(&r.B, kMmK * kMmN * 2));
    CHECK_CUDA(cudaMalloc(&r.C, ms * kMmN * 2));
  }
  // Every rank's inputs, its outputs poisoned (NaN), before each round.
  auto upload = [&]() -> bool {
    for (int d = 0; d < W; ++d) {
      InitAllRank& r = ranks[size_t(d)];
      if (cudaSetDevice(r.dev) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) return false;
      const std::vector<char> ha = fcPatternInput(fcFloat32, count, 99, d);
      const std::vector<char> hr = fcPatternInput(fcFloat32, size_t(W) * rc, 7, d);
      std::vector<char> hA(mmM * kMmK * 2), hB(kMmK * kMmN * 2);
      for (size_t i = 0; i < mmM * kMmK; ++i) fcStore(hA.data(), fcBfloat16, i, ternary(11, d, i));
      for (size_t i = 0; i < kMmK * kMmN; ++i) fcStore(hB.data(), fcBfloat16, i, ternary(13, d, i));
      if (cudaMemcpy(r.ar, ha.data(), ha.size(), cudaMemcpyHostToDevice) != cudaSuccess ||
          cudaMemcpy(r.rsIn, hr.data(), hr.size(), cudaMemcpyHostToDevice) != cudaSuccess ||
          cudaMemcpy(r.A, hA.data(), hA.size(), cudaMemcpyHostToDevice) != cudaSuccess ||
          cudaMemcpy(r.B, hB.data(), hB.size(), cudaMemcpyHostToDevice) != cudaSuccess ||
          cudaMemset(r.rsOut, 0xff, rc * sizeof(float)) != cudaSuccess ||
          cudaMemset(r.C, 0xff, ms * kMmN * 2) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
        return false;
    }
    return true;
  };
  // The ops, in order: FC_INITALL_OPS, letters A (the all-reduce, at most once: it is
  // in place), R (the reduce-scatter), M (the GEMM + reduce-scatter); default "ARM".
  // Every op kind issued is checked. FC_INITALL_ORDER=rank (default): rank 0 issues all
  // its ops, then rank 1, ...; =op: every rank issues op 0, then every rank op 1, ...
  const std::string ops = getenv("FC_INITALL_OPS") ? getenv("FC_INITALL_OPS") : "ARM";
  if (ops.empty() || ops.find_first_not_of("ARM") != std::string::npos || std::count(ops.begin(), ops.end(), 'A') > 1)
    return report(false, "FC_INITALL_OPS=%s: letters A (at most once), R, M", ops.c_str());
  const int nops = int(ops.size());
  auto issue = [&](InitAllRank& r, int k) {
    cudaSetDevice(r.dev);
    const char op = ops[size_t(k)];
    return op == 'A'   ? fcAllReduceOneShot(r.ar, r.ar, count, fcFloat32, fcSum, r.comm, r.stream)
           : op == 'R' ? fcReduceScatter(r.rsIn, r.rsOut, rc, fcFloat32, fcSum, r.comm, r.stream)
                       : fcMatmulReduceScatter(r.A, r.B, r.C, mmM, kMmN, kMmK, fcOpN, fcBfloat16, r.comm, r.stream);
  };
  // A round: every rank's ops in `opMajor` order; then every stream synchronised and
  // every communicator's asynchronous error read (a device wait that gave up leaves
  // the output as it was and reports there, not at the call).
  auto round = [&](bool opMajor, const char* name) -> int {
    if (!upload()) return report(false, "%s round: uploading the inputs failed", name);
    for (int i = 0; i < nops * W; ++i) {
      const int d = opMajor ? i % W : i / nops, k = opMajor ? i / W : i % nops;
      if (issue(ranks[size_t(d)], k) != fcSuccess)
        return report(false, "%s round, rank %d, op %d of %s (%s order): %s", name, d, k, ops.c_str(),
                      opMajor ? "op" : "rank", fcGetLastError(nullptr));
    }
    for (int d = 0; d < W; ++d) {
      InitAllRank& r = ranks[size_t(d)];
      CHECK_CUDA(cudaSetDevice(r.dev));
      CHECK_CUDA(cudaStreamSynchronize(r.stream));
      fcResult_t async = fcSuccess;
      CHECK_FC(fcCommGetAsyncError(r.comm, &async));
      if (async != fcSuccess)
        return report(false, "%s round (%s order, ops %s): rank %d's communicator reports %d: %s", name,
                      opMajor ? "op" : "rank", ops.c_str(), d, int(async), fcGetLastError(nullptr));
    }
    return 0;
  };
  // The first call of a fused GEMM op (cuBLASLt loads a kernel at its first launch)
  // or one that grows scratch can block in CUDA until the device is idle, which it
  // never is while an op this thread issued waits for a peer it has not issued yet:
  // one thread issuing rank by rank must issue such first calls op by op
  // (include/fusedcomm.h, fcCommInitAll). So a warm-up round op by op first, unless
  // FC_INITALL_WARMUP=0 (which shows the block: a timeout reported by the
  // communicator, in about FC_TIMEOUT_MS).
  const bool opMajor = std::string(getenv("FC_INITALL_ORDER") ? getenv("FC_INITALL_ORDER") : "") == "op";
  if (fcEnvInt("FC_INITALL_WARMUP", 1) != 0)
    if (const int failed = round(true, "warm-up"); failed != 0) return failed;
  if (const int failed = round(opMajor, "checked"); failed != 0) return failed;
  const bool ranAr = ops.find('A') != std::string::npos, ranRs = ops.find('R') != std::string::npos,
             ranMm = ops.find('M') != std::string::npos;
  double worstAr = 0, worstRs = 0;
  size_t badMm = 0;
  for (int d = 0; d < W; ++d) {
    InitAllRank& r = ranks[size_t(d)];
    CHECK_CUDA(cudaSetDevice(r.dev));
    std::vector<char> h(count * sizeof(float));
    CHECK_CUDA(cudaMemcpy(h.data(), r.ar, h.size(), cudaMemcpyDeviceToHost));
    if (ranAr) worstAr = std::max(worstAr, fcPatternSumError(h.data(), fcFloat32, count, 99, W));
    std::vector<float> rs(rc);
    CHECK_CUDA(cudaMemcpy(rs.data(), r.rsOut, rc * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < rc && ranRs; ++i) {
      int want = 0;
      for (int q = 0; q < W; ++q) want += fcPatternValue(7, q, size_t(d) * rc + i);
      const double e = std::fabs(double(rs[i]) - want);
      if (!(e <= worstRs)) worstRs = std::isnan(e) ? INFINITY : e;
    }
    // C = rows [d*ms, (d+1)*ms) of sum over ranks q of A_q x B_q.
    std::vector<char> hc(ms * kMmN * 2);
    CHECK_CUDA(cudaMemcpy(hc.data(), r.C, hc.size(), cudaMemcpyDeviceToHost));
    std::vector<float> acc(kMmN);
    for (size_t i = 0; i < ms && ranMm; ++i) {
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int q = 0; q < W; ++q)
        for (size_t k = 0; k < kMmK; ++k) {
          const float a = ternary(11, q, (size_t(d) * ms + i) * kMmK + k);
          if (a != 0.f)
            for (size_t j = 0; j < kMmN; ++j) acc[j] += a * ternary(13, q, k * kMmN + j);
        }
      for (size_t j = 0; j < kMmN; ++j) badMm += !(fcLoad(hc.data(), fcBfloat16, i * kMmN + j) == acc[j]);
    }
  }
  for (InitAllRank& r : ranks) {
    CHECK_CUDA(cudaSetDevice(r.dev));
    for (void* p : {static_cast<void*>(r.ar), static_cast<void*>(r.rsIn), static_cast<void*>(r.rsOut), r.A, r.B, r.C})
      CHECK_CUDA(cudaFree(p));
    CHECK_CUDA(cudaStreamDestroy(r.stream));
    CHECK_FC(fcCommDestroy(r.comm));
  }
  return report(worstAr == 0.0 && worstRs == 0.0 && badMm == 0,
                "fcCommInitAll, %d ranks on %s, ops %s: all-reduce max error %g, copy-engine reduce-scatter max "
                "error %g, staged fcMatmulReduceScatter %zu wrong elements (unchecked where not run)",
                W, ndev > 1 ? "one GPU each" : "GPU 0", ops.c_str(), worstAr, worstRs, badMm);
}

}  // namespace

int main(int argc, char** argv) {
  // initall with ranks sharing a GPU puts them in one CUDA context. Lazy module
  // loading may wait for that context to go idle before a kernel's first launch, and
  // it never does while a rank's kernel waits for a peer that this thread has yet to
  // launch: load every module when the context is made instead (before any CUDA call).
  if (argc == 2 && std::string(argv[1]) == "initall" && fcEnvInt("FC_SHARE_GPU", 0) == 1)
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIP: no CUDA GPU here\n");
    return 77;
  }
  if (argc != 2) {
    fprintf(stderr,
            "usage: fc_fault_tests skip|kill|kill-ce|kill-lamport2|kill-agmm|kill-mmrs|kill-mmar|abort|mismatch|"
            "mismatch-count|mismatch-dtype|mismatch-kind|mismatch-mmrs|mismatch-norm|mismatch-mmar|mismatch-mmar-align|"
            "mismatch-agmm|"
            "cycles|hosts|initall (under fcrun)\n");
    return 2;
  }
  g_scenario = argv[1];
  g_rank = fcEnvInt("FC_RANK", 0);
  g_nranks = fcEnvInt("FC_WORLD_SIZE", 1);
  const std::string scenario = argv[1];
  if (scenario == "initall") return initAll();
  fcUniqueId id;
  if (!fcUniqueIdFromEnv(&id)) return report(false, "FC_UNIQUE_ID not set: run under fcrun");
  // Ranks beyond the GPUs share them (FC_SHARE_GPU=1; init refuses it otherwise).
  CHECK_CUDA(cudaSetDevice(fcEnvInt("FC_LOCAL_RANK", g_rank) % ndev));
  if (scenario == "cycles") return cycles(id);
  if (scenario == "hosts") return hosts(id);

  if (scenario == "kill-ce") setenv("FC_REDUCE_SCATTER_ALGO", "ce", 1);
  if (scenario == "kill-agmm") setenv("FC_AGMM_ALGO", "engine", 1);
  if (scenario == "kill-mmrs") setenv("FC_MMRS_ALGO", "engine", 1), g_mmrsEngine = true;
  if (scenario == "kill-lamport2") setenv("FC_ALLREDUCE_ALGO", "twoshot-lamport", 1);
  fcComm_t comm;
  CHECK_FC(fcCommInitRank(&comm, g_nranks, id, g_rank));
  int rc = 2;
  if (scenario == "skip") {
    // The skipping rank pairs its later calls with its peers' earlier ones and
    // finishes; its peers' last call finds nobody and times out.
    rc = faultLoop(comm, 20, [](int k, cudaStream_t, Call&) { return !(g_rank == 1 && k == 5); },
                   g_rank != 1);
  } else if (scenario == "kill" || scenario == "kill-ce" || scenario == "kill-lamport2" || scenario == "kill-agmm" ||
             scenario == "kill-mmrs" || scenario == "kill-mmar") {
    // 64 KiB: the Lamport one-shot; 4 MiB of input: the copy-engine reduce-scatter;
    // 8 MiB: two passes of the Lamport two-shot at 4 ranks.
    const FaultOp op = scenario == "kill"        ? FaultOp::OneShot
                       : scenario == "kill-ce"   ? FaultOp::ReduceScatter
                       : scenario == "kill-agmm" ? FaultOp::AllGatherMatmul
                       : scenario == "kill-mmrs" ? FaultOp::MatmulReduceScatter
                       : scenario == "kill-mmar" ? FaultOp::MatmulAllReduce
                                                 : FaultOp::AllReduce;
    rc = faultLoop(comm, 1000,
                   [](int k, cudaStream_t s, Call&) {
                     // Every rank completes its first 50 calls: the victim, then dies between
                     // calls; the survivors, then start the limit's clock and issue the calls
                     // it never joins. From the loop's start the limit would also count the
                     // 50 calls, 2.6 s at 4 ranks time-sliced on one GPU (FC_SHARE_GPU).
                     if (k == 50) {
                       cudaStreamSynchronize(s);
                       if (g_rank == victim()) raise(SIGKILL);
                       g_since = Clock::now();
                     }
                     return true;
                   },
                   true, op == FaultOp::OneShot ? 1 << 14 : op == FaultOp::ReduceScatter ? 1 << 20 : 1 << 21, op);
  } else if (scenario == "mismatch") {
    const auto t0 = Clock::now();
    rc = faultLoop(comm, 20,
                   [comm](int k, cudaStream_t s, Call&) {
                     if (g_rank == 1 && k == 5) {
                       fcBarrier(comm, s);
                       return false;
                     }
                     return true;
                   },
                   true, size_t(1) << 21);
    // Detection is by signature, not by the timeout: it must be much faster.
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (rc == 0 && ms > double(timeoutMs())) rc = report(false, "took %.0f ms", ms);
  } else if (scenario.rfind("mismatch-", 0) == 0) {
    // Call 5 differs on rank 1 (calls 0-4 set up the buffers' sequence: the failure
    // must come from the mismatch, not from a first call).
    const auto t0 = Clock::now();
    const std::string what = scenario.substr(9);
    const FaultOp op = what == "mmrs"   ? FaultOp::MatmulReduceScatter
                       : what == "norm" ? FaultOp::AllReduceNorm
                       : what == "agmm" ? FaultOp::AllGatherMatmul
                       : what == "mmar" || what == "mmar-align" ? FaultOp::MatmulAllReduce
                                        : FaultOp::AllReduce;
    rc = faultLoop(comm, 20,
                   [what](int k, cudaStream_t, Call& call) {
                     if (g_rank != 1 || k != 5) return true;
                     if (what == "count") call.count += 7;
                     if (what == "dtype") call.dtype = fcFloat16;
                     if (what == "kind") call.count *= 16;  // 256 KiB -> 4 MiB: above the one-shot's limit
                     if (what == "mmrs" || what == "mmar") call.n += 8;
                     if (what == "mmar-align") call.count += 1;
                     if (what == "norm") call.n *= 2;
                     if (what == "agmm") call.gathered = true;
                     return true;
                   },
                   true, what == "kind" ? 1 << 16 : what == "agmm" ? 1 << 21 : 4000, op);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (rc == 0 && ms > double(timeoutMs())) rc = report(false, "took %.0f ms", ms);
  } else if (scenario == "abort") {
    if (g_rank == g_nranks - 1) {
      rc = faultLoop(comm, 50, [](int, cudaStream_t, Call&) { return true; }, false);
      const fcResult_t r = fcCommAbort(comm);
      return report(rc == 0 && r == fcSuccess, "fcCommAbort: %s", fcGetErrorString(r));
    }
    rc = faultLoop(comm, 1000, [](int, cudaStream_t, Call&) { return true; }, true);
  } else {
    fprintf(stderr, "unknown scenario %s\n", argv[1]);
  }
  const fcResult_t d = fcCommDestroy(comm);
  if (d != fcSuccess) return report(false, "fcCommDestroy: %s", fcGetLastError(nullptr));
  return rc;
}
