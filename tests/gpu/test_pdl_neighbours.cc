// fcAllReduce, fcAllReduceResidualRMSNorm and fcMatmulAllReduce (both forms, at decode
// shapes) between neighbouring kernels that use programmatic dependent launch (PDL), as
// an inference engine's kernels do (issue 44):
//
// (a) a consumer launched right behind our op with PDL (cudaLaunchKernelEx,
//     cudaLaunchAttributeProgrammaticStreamSerialization = 1) that executes
//     griddepcontrol.wait, then reads our outputs, never sees an incomplete output;
// (b) a producer launched normally before our op, which spins ~30 us and then writes
//     our inputs: our outputs are those of the final inputs;
// (c) the same producer launched with PDL that triggers its dependents first thing
//     (griddepcontrol.launch_dependents), as a GEMM with an early trigger does, and
//     writes our inputs ~30 us later: our kernels launch long before the inputs exist
//     and must still compute from the final ones.
// Every path of the ops at the sizes that take it (src/tuning: at 2 ranks the Lamport
// one-shot up to 4 MiB, the Lamport two-shot above; the norm's one Lamport kernel up to
// 1 MiB, its two-shot kernel above; forced: the barrier one-shot, the SM two-shot, the
// copy engine, the norm's one kernel to the push slot and the unfused all-reduce + norm;
// fcMatmulAllReduce's paths: below, at its test case), eager and in CUDA graphs, outputs poisoned before every call and inputs zeroed before
// every producer, every element compared with the verified result of a first call (our
// sums are in rank order: the same bits every call).
//
// The race this guards against. FlashInfer's trtllm_allreduce_fusion (TensorRT-LLM's
// Lamport kernels) lets its dependents launch early when trigger_completion_at_end is
// false: the one-shot kernel executes griddepcontrol.launch_dependents before it has
// written its outputs. vLLM (vllm-project/vllm#45448) saw NaN in every decode step at
// TP > 1 with that setting on the one-shot path and now forces
// trigger_completion_at_end=True there; FlashInfer itself read rms_gamma and the first
// residual row in FusedOp's constructor before cudaGridDependencySynchronize
// (flashinfer-ai/flashinfer#5081), so a kernel launched with PDL behind the producer of
// the residual could read it stale - the input side, (b) and (c) above.
//
// Why ours is immune, and on what it relies. griddepcontrol.wait returns only once the
// whole previous grid has completed and its memory operations are visible; an early
// launch_dependents only lets the next grid start its prologue sooner. So:
// - Input side: every kernel of ours launched with PDL (the Lamport one-shot and
//   two-shot, the norm's one kernel and two-shot kernel, the unfused path's norm kernel,
//   fcMatmulAllReduce's one decode kernel and the collectives behind its GEMMs)
//   executes griddepcontrol.wait (dev::waitForPreviousGrid) before it reads any input,
//   weight, residual or Lamport state; before it only argument arithmetic and shared
//   memory (src/collectives/*.cu). The others are launched without PDL (our decode
//   GEMM among them; the GEMM engines only behind their own entry barriers).
// - Output side: our kernels do trigger early (after their pushes, before they write
//   their outputs, as FlashInfer with trigger_completion_at_end=False), so a consumer
//   that reads our outputs WITHOUT executing griddepcontrol.wait first can see them
//   incomplete - the test measures this and prints it, it does not fail on it. A
//   consumer that waits, as the PDL contract requires, waits for our whole grid, which
//   has written everything: (a). Not covered here: a PDL kernel between ours and the
//   reader that never executes griddepcontrol.wait may complete before our grid does,
//   and the reader's wait then covers only that kernel.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "fc_data.h"
#include "gpu_env.h"
#include "pdl_neighbours.h"

namespace {

constexpr fcDataType_t kType = fcBfloat16;
constexpr size_t kEs = 2;
constexpr long long kProducerDelayNs = 30000;  // ~ a decode GEMM's time
constexpr int kEagerIters = 200;               // calls in a row, no host synchronisation
constexpr int kGraphIters = 10, kGraphReplays = 20;
// Ranks sharing one GPU (FC_SHARE_GPU=1, gpu-check share: correctness only) wait up to a
// time slice at every cross-rank step: a tenth of the calls there.
int scaled(int n) {
  const char* share = getenv("FC_SHARE_GPU");
  return share != nullptr && std::string(share) == "1" ? std::max(1, n / 10) : n;
}
constexpr float kEps = 1e-6f;

// The decode shapes (tokens x hidden, bf16) and the path each takes at 2 ranks:
// 8 KiB, 85 KiB and 2 MiB the Lamport one-shot (at 4 ranks: up to 512 KiB; at 2 MiB
// and 4.0 MiB its CTAs one to an SM, tuning::lamportSoloCtas: 2 and 4 packs a data
// thread), 10 MiB the Lamport two-shot; the norm's one kernel up to 1 MiB, its two-shot
// kernel above.
struct Shape {
  size_t tokens, hidden;
};
const Shape kShapes[] = {{1, 4096}, {17, 2560}, {128, 8192}, {255, 8192}, {640, 8192}};

struct Buf {
  explicit Buf(size_t bytes) : bytes(bytes) { CUDA_REQUIRE(cudaMalloc(&p, bytes)); }
  ~Buf() { cudaFree(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  void* p = nullptr;
  size_t bytes;
};

enum class Neighbour {
  Consumer,       // (a): inputs in place; a PDL consumer that waits checks the outputs
  SlowProducer,   // (b): a producer without PDL writes the inputs late
  EarlyProducer,  // (c): a PDL producer that triggers its dependents first writes them late
};
const char* name(Neighbour n) {
  return n == Neighbour::Consumer ? "PDL consumer" : n == Neighbour::SlowProducer ? "slow producer" : "early-trigger producer";
}

// One op under test: its inputs (final values kept in `src`, the buffers the op reads
// in `in`), its outputs and their verified values.
struct OpCase {
  std::vector<Buf*> in, src, out, want;
  std::function<fcResult_t(cudaStream_t)> call;
};

// Enqueue one iteration: poison the outputs; for a producer, zero the inputs and let
// the producer write them late; the op; the checking consumer (PDL, waits).
void enqueue(const OpCase& op, Neighbour nb, bool consumerWaits, unsigned* mismatches, cudaStream_t s) {
  for (Buf* o : op.out) CUDA_REQUIRE(cudaMemsetAsync(o->p, 0xff, o->bytes, s));  // NaN in bf16
  if (nb != Neighbour::Consumer) {
    std::vector<pdltest::Copy> copies;
    for (size_t k = 0; k < op.in.size(); ++k) {
      CUDA_REQUIRE(cudaMemsetAsync(op.in[k]->p, 0, op.in[k]->bytes, s));
      copies.push_back({op.src[k]->p, op.in[k]->p, op.in[k]->bytes});
    }
    CUDA_REQUIRE(pdltest::launchProducer(copies.data(), int(copies.size()), kProducerDelayNs,
                                         nb == Neighbour::EarlyProducer, s));
  }
  FC_REQUIRE(op.call(s));
  // The first output right behind the op (its PDL secondary); the others behind that
  // one (the consumer waited for the op, so they are complete as well).
  for (size_t k = 0; k < op.out.size(); ++k)
    CUDA_REQUIRE(pdltest::launchCheck(op.out[k]->p, op.want[k]->p, op.out[k]->bytes, mismatches,
                                      consumerWaits || k > 0, s));
}

// Every neighbour, eager and graph-replayed: no output word may differ from the
// verified one. Then, for information, what a consumer that skips griddepcontrol.wait
// sees (rank 0 prints it).
void checkNeighbours(const OpCase& op, const std::string& what) {
  const GpuEnv& env = gpuEnv();
  cudaStream_t s = env.streams[0];
  // [0] the mismatched words, [1..3] one of them: word, read, verified (launchCheck).
  Buf counter(4 * sizeof(unsigned));
  unsigned* mismatches = static_cast<unsigned*>(counter.p);
  auto reset = [&] {
    CUDA_REQUIRE(cudaMemsetAsync(mismatches, 0, sizeof(unsigned), s));
    CUDA_REQUIRE(cudaMemsetAsync(mismatches + 1, 0xff, 3 * sizeof(unsigned), s));
  };
  // The iterations with neighbour nb: eager calls in a row, or a captured graph of
  // some replayed; then the stream synchronised.
  auto run = [&](Neighbour nb, bool consumerWaits, bool graph) {
    if (graph) {
      cudaGraph_t g;
      cudaGraphExec_t exec;
      CUDA_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < scaled(kGraphIters); ++i) enqueue(op, nb, consumerWaits, mismatches, s);
      CUDA_REQUIRE(cudaStreamEndCapture(s, &g));
      CUDA_REQUIRE(cudaGraphInstantiate(&exec, g, 0));
      for (int r = 0; r < scaled(kGraphReplays); ++r) CUDA_REQUIRE(cudaGraphLaunch(exec, s));
      CUDA_REQUIRE(cudaStreamSynchronize(s));
      CUDA_REQUIRE(cudaGraphExecDestroy(exec));
      CUDA_REQUIRE(cudaGraphDestroy(g));
    } else {
      for (int i = 0; i < scaled(kEagerIters); ++i) enqueue(op, nb, consumerWaits, mismatches, s);
    }
  };
  for (Neighbour nb : {Neighbour::Consumer, Neighbour::SlowProducer, Neighbour::EarlyProducer}) {
    for (int graph = 0; graph < 2; ++graph) {
      reset();
      run(nb, true, graph);
      unsigned res[4] = {~0u, 0, 0, 0};
      CUDA_REQUIRE(cudaMemcpyAsync(res, mismatches, sizeof res, cudaMemcpyDeviceToHost, s));
      CUDA_REQUIRE(cudaStreamSynchronize(s));
      const unsigned bad = res[0];
      char detail[128] = "";
      if (bad) snprintf(detail, sizeof detail, " (e.g. word %u: read 0x%08x, verified 0x%08x)", res[1], res[2], res[3]);
      INFO(what << ", " << name(nb) << (graph ? ", CUDA graph" : ", eager") << detail << ": "
                << fcGetLastError(nullptr));
      CHECK(bad == 0u);
    }
  }
  // The control: the same consumer without griddepcontrol.wait. Incomplete outputs
  // here show that the consumer really runs while our kernel is still writing - the
  // window the waits above close. Not a failure: the contract requires the wait.
  unsigned seen[2] = {0, 0};
  for (int graph = 0; graph < 2; ++graph) {
    reset();
    run(Neighbour::Consumer, false, graph);
    CUDA_REQUIRE(cudaMemcpyAsync(&seen[graph], mismatches, sizeof(unsigned), cudaMemcpyDeviceToHost, s));
    CUDA_REQUIRE(cudaStreamSynchronize(s));
  }
  if (env.rank == 0)
    printf("pdl neighbours: %s: a consumer WITHOUT griddepcontrol.wait saw %u incomplete words in %d eager calls, "
           "%u in %d graph-replayed ones (with the wait: none)\n",
           what.c_str(), seen[0], scaled(kEagerIters), seen[1], scaled(kGraphIters) * scaled(kGraphReplays));
}

// On the test's stream, waited for (see keepAsWanted: a pageable cudaMemcpy to the
// device may also return before its DMA has landed, on the legacy stream).
void upload(const Buf& b, const std::vector<char>& h) {
  cudaStream_t s = gpuEnv().streams[0];
  CUDA_REQUIRE(cudaMemcpyAsync(b.p, h.data(), h.size(), cudaMemcpyHostToDevice, s));
  CUDA_REQUIRE(cudaStreamSynchronize(s));
}

std::vector<char> download(const Buf& b) {
  std::vector<char> h(b.bytes);
  cudaStream_t s = gpuEnv().streams[0];
  CUDA_REQUIRE(cudaMemcpyAsync(h.data(), b.p, b.bytes, cudaMemcpyDeviceToHost, s));
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  return h;
}

// The verified result of one plain call (stream synchronised), copied to `want` on the
// test's stream and waited for. Not cudaMemcpy: a device-to-device cudaMemcpy may return
// before the copy is done, and it runs on the legacy default stream, which the test's
// (non-blocking) stream does not wait for: the next iteration's poisoning of the output
// then raced the copy, and `want` held the poison. Where ranks share a GPU the copy
// lost that race every time (rank 1, 1 x 4096: every word "wrong", the verified value
// 0xffffffff).
void keepAsWanted(const OpCase& op, cudaStream_t s) {
  for (size_t k = 0; k < op.out.size(); ++k)
    CUDA_REQUIRE(cudaMemcpyAsync(op.want[k]->p, op.out[k]->p, op.out[k]->bytes, cudaMemcpyDeviceToDevice, s));
  CUDA_REQUIRE(cudaStreamSynchronize(s));
}

// The largest relative error of normOut against the float64 RMSNorm of the returned
// residualOut (rows x hidden) times the weight (fc-bench arnorm's check: <= 2^-7).
double normError(const std::vector<char>& resOut, const std::vector<char>& normOut, const std::vector<char>& w,
                 size_t rows, size_t hidden) {
  double worst = 0;
  for (size_t t = 0; t < rows; ++t) {
    double ss = 0;
    for (size_t k = 0; k < hidden; ++k) ss += std::pow(double(fcLoad(resOut.data(), kType, t * hidden + k)), 2);
    const double rstd = 1.0 / std::sqrt(ss / double(hidden) + double(kEps));
    for (size_t k = 0; k < hidden; ++k) {
      const size_t i = t * hidden + k;
      const double want = fcLoad(resOut.data(), kType, i) * rstd * fcLoad(w.data(), kType, k);
      const double e = std::fabs(fcLoad(normOut.data(), kType, i) - want) / std::max(std::fabs(want), 1e-3);
      worst = std::max(worst, std::isnan(e) ? INFINITY : e);
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("PDL neighbours: fcAllReduce behind a producer and before a consumer, every path, eager and graphs") {
  const GpuEnv& env = gpuEnv();
  cudaStream_t s = env.streams[0];
  // The auto choice, then each forced algorithm (FC_ALLREDUCE_ALGO) on its own communicator.
  const char* algos[] = {nullptr, "oneshot", "twoshot", "twoshot-lamport", "ce"};
  for (const char* algo : algos) {
    ForcedComm fc(algo ? "FC_ALLREDUCE_ALGO" : nullptr, algo ? algo : "");
    for (const Shape& sh : kShapes) {
      const size_t count = sh.tokens * sh.hidden, bytes = count * kEs;
      // The barrier one-shot stages its input in the workspace (fcAllReduce refuses more).
      if (algo && std::string(algo) == "oneshot" && bytes + 64 > GpuEnv::kWorkspaceBytes) continue;
      const uint64_t seed = freshSeed();
      Buf in(bytes), src(bytes), out(bytes), want(bytes);
      const std::vector<char> h = fcPatternInput(kType, count, seed, env.rank);
      upload(in, h);
      upload(src, h);
      OpCase op{{&in}, {&src}, {&out}, {&want},
                [&](cudaStream_t st) { return fcAllReduce(in.p, out.p, count, kType, fcSum, fc.comm, st); }};
      CUDA_REQUIRE(cudaMemsetAsync(out.p, 0xff, bytes, s));  // on s: a cudaMemset may land after the op
      FC_REQUIRE(op.call(s));
      CUDA_REQUIRE(cudaStreamSynchronize(s));
      const std::vector<char> got = download(out);
      const std::string what = std::string("fcAllReduce ") + (algo ? algo : "auto") + ", " +
                               std::to_string(sh.tokens) + " x " + std::to_string(sh.hidden);
      INFO(what);
      // CHECK, not REQUIRE: every rank goes on to the same collectives (gpu_env.h).
      CHECK(fcPatternSumError(got.data(), kType, count, seed, env.nranks) == 0.0);  // exact integer sums
      keepAsWanted(op, s);
      checkNeighbours(op, what);
    }
  }
}

TEST_CASE("PDL neighbours: fcAllReduceResidualRMSNorm behind a producer and before a consumer, every path") {
  const GpuEnv& env = gpuEnv();
  cudaStream_t s = env.streams[0];
  // The auto choice (one kernel, two-shot kernel), the one kernel to the push slot, the
  // two-shot kernel from the first byte, and the all-reduce + local norm kernel
  // (FC_ARNORM_ALGO).
  const char* algos[] = {nullptr, "fused", "twoshot", "unfused"};
  for (const char* algo : algos) {
    ForcedComm fc(algo ? "FC_ARNORM_ALGO" : nullptr, algo ? algo : "");
    for (const Shape& sh : kShapes) {
      const size_t n = sh.tokens * sh.hidden, bytes = n * kEs;
      const uint64_t seed = freshSeed();
      Buf in(bytes), res(bytes), w(sh.hidden * kEs), srcIn(bytes), srcRes(bytes), srcW(sh.hidden * kEs);
      Buf resOut(bytes), normOut(bytes), wantRes(bytes), wantNorm(bytes);
      // Integer inputs: the rank sum and the residual add are exact.
      const std::vector<char> hIn = fcPatternInput(kType, n, seed, env.rank);
      const std::vector<char> hRes = fcPatternInput(kType, n, seed + 1, 0);
      const std::vector<char> hW = fcPatternInput(kType, sh.hidden, seed + 2, 0);
      for (const Buf* b : {&in, &srcIn}) upload(*b, hIn);
      for (const Buf* b : {&res, &srcRes}) upload(*b, hRes);
      for (const Buf* b : {&w, &srcW}) upload(*b, hW);
      OpCase op{{&in, &res, &w}, {&srcIn, &srcRes, &srcW}, {&normOut, &resOut}, {&wantNorm, &wantRes},
                [&](cudaStream_t st) {
                  return fcAllReduceResidualRMSNorm(in.p, res.p, w.p, resOut.p, normOut.p, sh.tokens, sh.hidden,
                                                    kEps, kType, fc.comm, st);
                }};
      CUDA_REQUIRE(cudaMemsetAsync(resOut.p, 0xff, bytes, s));
      CUDA_REQUIRE(cudaMemsetAsync(normOut.p, 0xff, bytes, s));
      FC_REQUIRE(op.call(s));
      CUDA_REQUIRE(cudaStreamSynchronize(s));
      const std::vector<char> gotRes = download(resOut), gotNorm = download(normOut);
      const std::string what = std::string("fcAllReduceResidualRMSNorm ") + (algo ? algo : "auto") + ", " +
                               std::to_string(sh.tokens) + " x " + std::to_string(sh.hidden);
      INFO(what);
      // residualOut exact; normOut within 2^-7 of the float64 norm of that residualOut
      // (fc-bench arnorm's check).
      double resErr = 0;
      for (size_t i = 0; i < n; ++i) {
        double want = fcLoad(hRes.data(), kType, i);
        for (int r = 0; r < env.nranks; ++r) want += fcPatternValue(seed, r, i);
        const double x = fcLoad(gotRes.data(), kType, i);
        resErr = std::max(resErr, std::isnan(x) ? INFINITY : std::fabs(x - want));
      }
      CHECK(resErr == 0.0);
      CHECK(normError(gotRes, gotNorm, hW, sh.tokens, sh.hidden) <= 0x1p-7);
      keepAsWanted(op, s);
      checkNeighbours(op, what);
    }
  }
}

namespace {

// fcMatmulAllReduce's decode shapes (M x N x K, bf16, B [N, K]) and the path each takes at
// 2 ranks under auto: 1 row the one kernel; 8 x 2056 x 4104 our decode GEMM (K >= 1.5 N),
// then the all-reduce launched with PDL behind it; 16 x 1032 x 264 cuBLASLt's GEMM, then
// the all-reduce; 72 x 2056 x 136 the same. Forced (FC_MMAR_ALGO): fused (the one kernel
// where it takes the shape), decode (the decode engine: the pushing GEMM, then the rows
// kernel with PDL), unfused.
struct GemmShape {
  size_t M, N, K;
};
const GemmShape kGemmShapes[] = {{1, 4096, 512}, {8, 2056, 4104}, {16, 1032, 264}, {72, 2056, 136}};

// x rounded to bf16 (x exact in float: integer sums below 2^24).
double toBf16(double x) {
  char b[2];
  fcStore(b, kType, 0, float(x));
  return fcLoad(b, kType, 0);
}

}  // namespace

TEST_CASE("PDL neighbours: fcMatmulAllReduce (both forms) behind a producer and before a consumer, every path") {
  const GpuEnv& env = gpuEnv();
  cudaStream_t s = env.streams[0];
  const char* algos[] = {nullptr, "fused", "decode", "unfused"};
  for (const char* algo : algos) {
    ForcedComm fc(algo ? "FC_MMAR_ALGO" : nullptr, algo ? algo : "");
    for (const GemmShape& sh : kGemmShapes) {
      const size_t M = sh.M, N = sh.N, K = sh.K, cBytes = M * N * kEs;
      const uint64_t seed = freshSeed();
      // Integer inputs (in [-8, 8]): each rank's product exact before its one rounding.
      std::vector<std::vector<char>> hA, hB;
      for (int r = 0; r < env.nranks; ++r) {
        hA.push_back(fcPatternInput(kType, M * K, seed, r));
        hB.push_back(fcPatternInput(kType, N * K, seed + 1, r));
      }
      const std::vector<char> hRes = fcPatternInput(kType, M * N, seed + 2, 0);
      const std::vector<char> hW = fcPatternInput(kType, N, seed + 3, 0);
      // The sum over ranks of each rank's product rounded once (what C must hold before
      // its own rounding).
      std::vector<double> sum(M * N, 0.0);
      for (int r = 0; r < env.nranks; ++r)
        for (size_t i = 0; i < M; ++i)
          for (size_t j = 0; j < N; ++j) {
            double p = 0;
            for (size_t k = 0; k < K; ++k)
              p += double(fcLoad(hA[size_t(r)].data(), kType, i * K + k)) *
                   double(fcLoad(hB[size_t(r)].data(), kType, j * K + k));
            sum[i * N + j] += toBf16(p);
          }
      Buf A(M * K * kEs), B(N * K * kEs), res(cBytes), w(N * kEs);
      Buf srcA(M * K * kEs), srcB(N * K * kEs), srcRes(cBytes), srcW(N * kEs);
      for (const Buf* b : {&A, &srcA}) upload(*b, hA[size_t(env.rank)]);
      for (const Buf* b : {&B, &srcB}) upload(*b, hB[size_t(env.rank)]);
      for (const Buf* b : {&res, &srcRes}) upload(*b, hRes);
      for (const Buf* b : {&w, &srcW}) upload(*b, hW);
      for (int norm = 0; norm < 2; ++norm) {
        Buf C(cBytes), resOut(cBytes), normOut(cBytes), wantC(cBytes), wantRes(cBytes), wantNorm(cBytes);
        OpCase op;
        if (norm) {
          op = {{&A, &B, &res, &w}, {&srcA, &srcB, &srcRes, &srcW}, {&normOut, &resOut}, {&wantNorm, &wantRes},
                [&](cudaStream_t st) {
                  return fcMatmulAllReduceResidualRMSNorm(A.p, B.p, res.p, w.p, resOut.p, normOut.p, M, N, K, kEps,
                                                          fcOpT, kType, fc.comm, st);
                }};
        } else {
          op = {{&A, &B}, {&srcA, &srcB}, {&C}, {&wantC}, [&](cudaStream_t st) {
                  return fcMatmulAllReduce(A.p, B.p, C.p, M, N, K, fcOpT, kType, fc.comm, st);
                }};
        }
        for (Buf* o : op.out) CUDA_REQUIRE(cudaMemsetAsync(o->p, 0xff, o->bytes, s));
        FC_REQUIRE(op.call(s));
        CUDA_REQUIRE(cudaStreamSynchronize(s));
        const std::string what = std::string(norm ? "fcMatmulAllReduceResidualRMSNorm " : "fcMatmulAllReduce ") +
                                 (algo ? algo : "auto") + ", " + std::to_string(M) + " x " + std::to_string(N) +
                                 " x " + std::to_string(K);
        INFO(what);
        // C: the sum rounded once. residualOut: the sum + residual rounded once, or the sum
        // rounded first (the paths' two forms), exactly; normOut within 2^-7 of the
        // float64 RMSNorm of the returned residualOut.
        double err = 0;
        const std::vector<char> got = download(norm ? resOut : C);
        for (size_t at = 0; at < M * N; ++at) {
          const double g = fcLoad(got.data(), kType, at);
          const double r = norm ? fcLoad(hRes.data(), kType, at) : 0.0;
          const bool exact = norm ? g == toBf16(sum[at] + r) || g == toBf16(toBf16(sum[at]) + r) : g == toBf16(sum[at]);
          if (!exact) err = std::max(err, std::isnan(g) ? INFINITY : std::fabs(g - sum[at] - r));
        }
        CHECK(err == 0.0);
        if (norm) CHECK(normError(got, download(normOut), hW, M, N) <= 0x1p-7);
        keepAsWanted(op, s);
        checkNeighbours(op, what);
      }
    }
  }
}
