// fcAllReduceResidualRMSNorm on real GPUs: both outputs against a float64 reference
// from fresh random inputs (every rank draws every rank's), for every dtype, odd token
// counts and hidden sizes on both paths (one Lamport kernel; all-reduce + local norm),
// rows longer than the registers keep, in place (residualOut == residual), poisoned
// outputs, the same bits on every rank, graph capture and replay, many calls in a row,
// and argument rejection with outputs untouched.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "fc_data.h"
#include "fp8_ref.h"
#include "gpu_env.h"

namespace {

struct Buf {
  explicit Buf(size_t bytes) : bytes(bytes) { CUDA_REQUIRE(cudaMalloc(&p, bytes ? bytes : 16)); }
  ~Buf() { cudaFree(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  char* c() const { return static_cast<char*>(p); }
  void* p = nullptr;
  size_t bytes;
};

std::vector<char> download(const void* src, size_t bytes) {
  std::vector<char> h(bytes);
  CUDA_REQUIRE(cudaMemcpy(h.data(), src, bytes, cudaMemcpyDeviceToHost));
  return h;
}

// Ends with a device synchronisation: the ops under test run on non-blocking streams,
// which are not ordered after the legacy stream's copy, and a cudaMemcpy from pageable
// memory may return before its DMA has landed (OnesCalls uploads, then calls at once).
void upload(void* dst, const std::vector<char>& h) {
  CUDA_REQUIRE(cudaMemcpy(dst, h.data(), h.size(), cudaMemcpyHostToDevice));
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

// n normal values (scale s) rounded to t, from seed.
std::vector<char> normals(fcDataType_t t, size_t n, uint64_t seed, float s) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, s);
  std::vector<char> h(n * fcTypeSize(t));
  for (size_t i = 0; i < n; ++i) fcStore(h.data(), t, i, normal(rng));
  return h;
}

// The unit in the last place of |x| in t (subnormals: the smallest step).
double ulp(fcDataType_t t, double x) {
  const double unit = t == fcFloat32 ? 0x1p-23 : t == fcFloat16 ? 0x1p-10 : 0x1p-7;
  const double tiny = t == fcFloat16 ? 0x1p-24 : t == fcFloat32 ? 0x1p-149 : 0x1p-133;
  return std::max(tiny, std::ldexp(unit, std::ilogb(std::max(std::fabs(x), 1e-30))));
}

// Whether a call of `bytes` (`tokens` rows) rounds the all-reduced sum before it
// adds the residual: the two-shot kernel and the unfused path (all-reduce, then the local
// norm) do; the one-kernel path does not. Auto takes it for up to 384 rows (640 of at
// most 4 KiB) up to 4 MiB at 2 ranks, above 256 KiB to 576 KiB at 3-4 ranks (from 0 for
// rows of 16 KiB or more), never beyond (src/tuning/tuning.cc); up
// to the push slot with FC_ARNORM_ALGO=fused (4 MiB at 2 ranks, 1 MiB at 3-4,
// src/device/device_comm.h), none with FC_ARNORM_ALGO=unfused or twoshot.
bool roundsSumFirst(size_t tokens, size_t bytes, int nranks) {
  const char* algo = getenv("FC_ARNORM_ALGO");
  const std::string a = algo ? algo : "auto";
  if (a == "unfused" || a == "twoshot") return true;
  if (a == "fused") return bytes > (nranks <= 2 ? size_t(4) << 20 : size_t(1) << 20);
  const size_t rowBytes = bytes / tokens;
  if (nranks <= 2) return tokens > (rowBytes <= size_t(4) << 10 ? 640 : 384) || bytes > size_t(4) << 20;
  if (nranks <= 4)  // rows of 16 KiB and more take the one kernel from the first byte
    return (bytes <= size_t(256) << 10 && rowBytes < size_t(16) << 10) || bytes > size_t(576) << 10;
  return true;
}

struct Shape {
  size_t tokens, hidden;
};

struct Result {
  size_t badResidual = 0, badNorm = 0;
  double worstResidual = 0, worstNorm = 0;  // in ulps
};

// Fresh inputs of one call, on the host (every rank draws every rank's input from the
// same seeds) and uploaded: this rank's input, the residual, the weight; and a
// poisoned residualOut.
struct Inputs {
  std::vector<std::vector<char>> ins;  // ins[r]: rank r's input
  std::vector<char> residual, weight;
  Buf in, res, w, resOut;
  Inputs(fcDataType_t t, size_t tokens, size_t hidden)
      : in(tokens * hidden * fcTypeSize(t)), res(in.bytes), w(hidden * fcTypeSize(t)), resOut(in.bytes) {
    const GpuEnv& env = gpuEnv();
    const uint64_t seed = freshSeed();
    const size_t n = tokens * hidden;
    for (int r = 0; r < env.nranks; ++r) ins.push_back(normals(t, n, seed + uint64_t(r), 1.f));
    residual = normals(t, n, seed + 1000, 2.f);
    weight = normals(t, hidden, seed + 2000, 1.f);
    upload(in.p, ins[size_t(env.rank)]);
    upload(res.p, residual);
    upload(w.p, weight);
    CUDA_REQUIRE(cudaMemset(resOut.p, 0xff, in.bytes));
  }
};

// One call on fresh inputs, checked against float64; returns the outputs' errors.
Result runAndCheck(fcDataType_t t, Shape sh, bool inPlace, cudaStream_t stream, std::vector<char>* outBits) {
  const GpuEnv& env = gpuEnv();
  const size_t es = fcTypeSize(t), n = sh.tokens * sh.hidden, bytes = n * es;
  Inputs x(t, sh.tokens, sh.hidden);
  const std::vector<std::vector<char>>& ins = x.ins;
  const std::vector<char>&residual = x.residual, &weight = x.weight;
  Buf &in = x.in, &res = x.res, &w = x.w, &resOut = x.resOut, out(bytes + 16);
  // All-ones bytes are NaN in every dtype: an element never written cannot pass.
  CUDA_REQUIRE(cudaMemset(out.p, 0xff, out.bytes));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  void* ro = inPlace ? res.p : resOut.p;
  FC_REQUIRE(fcAllReduceResidualRMSNorm(in.p, res.p, w.p, ro, out.p, sh.tokens, sh.hidden, 1e-5f, t, env.comm,
                                        stream));
  CUDA_REQUIRE(cudaStreamSynchronize(stream));
  CUDA_REQUIRE(cudaGetLastError());
  const std::vector<char> gotRes = download(ro, bytes), got = download(out.p, bytes + 16);
  // Small: sum and residual rounded once; large: the all-reduce's sum is rounded first.
  const bool twoRoundings = roundsSumFirst(sh.tokens, bytes, env.nranks);
  Result r;
  for (size_t row = 0; row < sh.tokens; ++row) {
    double ss = 0;
    for (size_t h = 0; h < sh.hidden; ++h) {
      const size_t i = row * sh.hidden + h;
      double sum = 0, mag = 0;
      for (int k = 0; k < env.nranks; ++k) {
        const double x = fcLoad(ins[size_t(k)].data(), t, i);
        sum += x;
        mag += std::fabs(x);
      }
      const double ref = sum + fcLoad(residual.data(), t, i);
      const double tol = 0.5 * ulp(t, ref) + (twoRoundings ? 0.5 * ulp(t, sum) : 0.0) +
                         (env.nranks + 2) * 0x1p-24 * (mag + std::fabs(ref));
      const double x = fcLoad(gotRes.data(), t, i);
      const double err = std::fabs(x - ref);
      r.worstResidual = std::max(r.worstResidual, err / ulp(t, ref));
      if (!(err <= tol)) ++r.badResidual;
      ss += x * x;  // the statistic is over the rounded residualOut
    }
    const double rstd = 1.0 / std::sqrt(ss / double(sh.hidden) + 1e-5);
    for (size_t h = 0; h < sh.hidden; ++h) {
      const size_t i = row * sh.hidden + h;
      const double ref = fcLoad(gotRes.data(), t, i) * rstd * fcLoad(weight.data(), t, h);
      // One rounding, plus fp32 arithmetic (the row's sum of squares, rsqrt).
      const double tol = 0.5 * ulp(t, ref) + std::fabs(ref) * 0x1p-19;
      const double err = std::fabs(double(fcLoad(got.data(), t, i)) - ref);
      r.worstNorm = std::max(r.worstNorm, err / ulp(t, ref));
      if (!(err <= tol)) ++r.badNorm;
    }
  }
  // Nothing past the end of normOut was written.
  if (!std::isnan(fcLoad(got.data() + bytes, t, 0))) ++r.badNorm;
  if (outBits) *outBits = got;
  return r;
}

const fcDataType_t kTypes[] = {fcBfloat16, fcFloat16, fcFloat32};

}  // namespace

TEST_CASE("fcAllReduceResidualRMSNorm: float64 reference, dtypes, odd shapes, both paths, in place, same bits") {
  const GpuEnv& env = gpuEnv();
  // Odd token counts; hidden from one pack to rows longer than the registers keep
  // (20480 bf16 = 2560 packs: 5 per thread of 512); more rows than CTAs; and sizes
  // past the one-kernel limit (the two-shot kernel at 2 ranks, and at 4 with
  // FC_ARNORM_ALGO=fused: 300 x 8192 runs in 2-3 passes of the push buffers at 2 ranks,
  // 3-5 at 4; 450 x 5120 in 16-bit types in 2 passes of 256 rows at 2 ranks, aligned to
  // the kernel's 128 clusters; else all-reduce + norm). 200 x 5120 (16-bit types) and
  // 150 x 2600 (fp32) give the one kernel's wide CTAs two rows each, together. 600 x 2048
  // (16-bit types) is the one kernel's at 2 ranks (rows of 4 KiB: to 640), 5 rows to a
  // CTA; 3 x 8192 its at 4 ranks from the first byte (rows of 16 KiB). 1501 x 2056 and
  // 1031 x 5120: past 3 MiB, where the unfused path's local norm holds 4 and 2 rows a CTA,
  // the last group partial (1501 x 2056 in 16-bit types: the unfused path at 2 ranks by
  // default, rows of at most 5 KiB past 1024; else with FC_ARNORM_ALGO=unfused).
  const Shape shapes[] = {{1, 8},      {3, 24},     {7, 4096},   {33, 5120},  {1, 8192},   {128, 4096},
                          {5, 20480},  {200, 1000}, {300, 2056}, {129, 8192}, {300, 8192},  {450, 5120},
                          {200, 5120}, {150, 2600}, {600, 2048}, {3, 8192},   {1501, 2056}, {1031, 5120}};
  for (fcDataType_t t : kTypes) {
    for (Shape sh : shapes) {
      if (sh.hidden * fcTypeSize(t) % 16) continue;
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        std::vector<char> bits;
        const Result r = runAndCheck(t, sh, inPlace, env.streams[0], &bits);
        INFO(fcTypeName(t) << " " << sh.tokens << " x " << sh.hidden << (inPlace ? " in place" : "")
                           << ": residualOut worst " << r.worstResidual << " ulp, normOut worst " << r.worstNorm
                           << " ulp");
        CHECK(r.badResidual == 0);
        CHECK(r.badNorm == 0);
        // Every rank wrote the same bits.
        Buf mine(bits.size()), all(size_t(env.nranks) * bits.size());
        upload(mine.p, bits);
        FC_REQUIRE(fcAllGather(mine.p, all.p, bits.size() / 2, fcBfloat16, env.comm, nullptr));
        CUDA_REQUIRE(cudaDeviceSynchronize());
        const std::vector<char> g = download(all.p, all.bytes);
        int differing = 0;
        for (int k = 0; k < env.nranks; ++k)
          differing += memcmp(g.data() + size_t(k) * bits.size(), bits.data(), bits.size()) != 0;
        CHECK(differing == 0);
      }
    }
  }
}

namespace {

// Calls whose sums are exact in bf16, up to maxTokens rows of `hidden`: input, residual
// and weight all ones, so that residualOut = W + 1 and normOut = weight (1).
struct OnesCalls {
  static constexpr fcDataType_t t = fcBfloat16;
  size_t hidden, bytes;
  Buf in, res, w, resOut, out;
  OnesCalls(size_t maxTokens, size_t hidden)
      : hidden(hidden), bytes(maxTokens * hidden * 2), in(bytes), res(bytes), w(hidden * 2), resOut(bytes),
        out(bytes) {
    std::vector<char> ones(bytes);
    for (size_t i = 0; i < bytes / 2; ++i) fcStore(ones.data(), t, i, 1.f);
    upload(in.p, ones);
    upload(res.p, ones);
    upload(w.p, std::vector<char>(ones.begin(), ones.begin() + std::ptrdiff_t(hidden * 2)));
  }
  void call(size_t tokens, cudaStream_t s, fcComm_t comm = nullptr) const {
    FC_REQUIRE(fcAllReduceResidualRMSNorm(in.p, res.p, w.p, resOut.p, out.p, tokens, hidden, 1e-6f, t,
                                          comm ? comm : gpuEnv().comm, s));
  }
  void poison(cudaStream_t s) const {
    CUDA_REQUIRE(cudaMemsetAsync(out.p, 0xff, bytes, s));
    CUDA_REQUIRE(cudaMemsetAsync(resOut.p, 0xff, bytes, s));
  }
  // Elements of the first `tokens` rows whose outputs are not W + 1 and 1.
  size_t wrong(size_t tokens) const {
    const size_t n = tokens * hidden;
    const std::vector<char> r = download(resOut.p, n * 2), o = download(out.p, n * 2);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
      bad += fcLoad(r.data(), t, i) != float(gpuEnv().nranks + 1) || std::fabs(fcLoad(o.data(), t, i) - 1.0) > 0x1p-7;
    return bad;
  }
};

}  // namespace

TEST_CASE("fcAllReduceResidualRMSNorm: CUDA graph replays and 1,000 calls in a row on any stream") {
  const GpuEnv& env = gpuEnv();
  const size_t tokens = 16;
  const OnesCalls x(tokens, 4096);
  cudaStream_t s;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto check = [&](const char* what) {
    INFO(what);
    CHECK(x.wrong(tokens) == 0);
  };
  for (int k = 0; k < 1000; ++k) x.call(tokens, s);
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  check("1,000 eager calls");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < 3; ++k) x.call(tokens, s);
  CUDA_REQUIRE(cudaStreamEndCapture(s, &graph));
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 5; ++rep) {
    x.poison(s);
    CUDA_REQUIRE(cudaGraphLaunch(exec, s));
    CUDA_REQUIRE(cudaStreamSynchronize(s));
    check("graph replay");
  }
  // Eager again after the replays (the eager and captured channels stay in step).
  x.call(tokens, env.streams[1]);
  CUDA_REQUIRE(cudaStreamSynchronize(env.streams[1]));
  check("eager after the graph");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

TEST_CASE("fcAllReduceResidualRMSNorm: one-kernel and two-shot calls interleaved, eager and graph-replayed") {
  // The two kernels share the push buffers' rotation (the rank's buffer index), the
  // two-shot moving it by its passes: calls of both, back to back on one stream, each
  // checked exactly, then the same sequence captured and replayed. Tokens of 8192 on the
  // suite's communicator (at 2 ranks 300: 2 passes, 600: 3) and on one with the two-shot's
  // gather sets (FC_ARNORM_GATHER_SET=1: 1 and 2 passes); tokens of 5120, whose passes
  // the kernel aligns to its clusters where that gives a CTA fewer rows (at 2 ranks 512:
  // 2 passes of 256 rows, 1000: 4), and the same without (FC_ARNORM_PASS_ALIGN=0: passes
  // of 408 rows, 2 and 3).
  const std::vector<size_t> sizes8192 = {16, 300, 1, 150, 600, 300}, sizes5120 = {16, 512, 1, 150, 1000, 512};
  const OnesCalls rows8192(600, 8192), rows5120(1000, 5120);
  const ForcedComm gather("FC_ARNORM_GATHER_SET", "1"), unaligned("FC_ARNORM_PASS_ALIGN", "0");
  cudaStream_t s;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  struct Case {
    const char* what;
    fcComm_t comm;
    const OnesCalls& x;
    const std::vector<size_t>& sizes;
  };
  for (const Case& c : {Case{"hidden 8192, the suite's communicator", gpuEnv().comm, rows8192, sizes8192},
                        Case{"hidden 8192, FC_ARNORM_GATHER_SET=1", gather.comm, rows8192, sizes8192},
                        Case{"hidden 5120, the suite's communicator", gpuEnv().comm, rows5120, sizes5120},
                        Case{"hidden 5120, FC_ARNORM_PASS_ALIGN=0", unaligned.comm, rows5120, sizes5120}}) {
    INFO(c.what);
    const OnesCalls& x = c.x;
    const fcComm_t comm = c.comm;
    const std::vector<size_t>& sizes = c.sizes;
    for (int round = 0; round < 8; ++round)
      for (size_t tokens : sizes) {
        x.poison(s);
        x.call(tokens, s, comm);
        CUDA_REQUIRE(cudaStreamSynchronize(s));
        INFO("eager round " << round << ", " << tokens << " tokens");
        REQUIRE(x.wrong(tokens) == 0);
      }
    // Captured: the last call of the sequence is checked after each replay.
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (size_t tokens : sizes) {
      x.poison(s);
      x.call(tokens, s, comm);
    }
    CUDA_REQUIRE(cudaStreamEndCapture(s, &graph));
    CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < 5; ++rep) {
      CUDA_REQUIRE(cudaGraphLaunch(exec, s));
      CUDA_REQUIRE(cudaStreamSynchronize(s));
      INFO("replay " << rep);
      CHECK(x.wrong(sizes.back()) == 0);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(s);
}

TEST_CASE("fcAllReduceResidualRMSNorm: bad arguments are refused and touch no output") {
  const GpuEnv& env = gpuEnv();
  const fcDataType_t t = fcBfloat16;
  const size_t tokens = 4, hidden = 64, bytes = tokens * hidden * 2;
  Buf in(bytes), res(bytes), w(hidden * 2), resOut(bytes), out(bytes);
  CUDA_REQUIRE(cudaMemset(out.p, 0x5a, bytes));
  CUDA_REQUIRE(cudaMemset(resOut.p, 0x5a, bytes));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  std::vector<int> host(16);
  struct Bad {
    const char* what;
    fcResult_t want;
    const void *in, *res, *w;
    void *ro, *out;
    size_t tokens, hidden;
    float eps;
    fcDataType_t t;
  };
  const Bad bads[] = {
      {"NULL residual", fcInvalidArgument, in.p, nullptr, w.p, resOut.p, out.p, tokens, hidden, 1e-6f, t},
      {"NULL normOut", fcInvalidArgument, in.p, res.p, w.p, resOut.p, nullptr, tokens, hidden, 1e-6f, t},
      {"hidden 0", fcInvalidArgument, in.p, res.p, w.p, resOut.p, out.p, tokens, 0, 1e-6f, t},
      {"hidden 12 (not 16 bytes)", fcInvalidArgument, in.p, res.p, w.p, resOut.p, out.p, 2, 12, 1e-6f, t},
      {"misaligned weight", fcInvalidArgument, in.p, res.p, w.c() + 2, resOut.p, out.p, tokens, 8, 1e-6f, t},
      {"negative eps", fcInvalidArgument, in.p, res.p, w.p, resOut.p, out.p, tokens, hidden, -1.f, t},
      {"NaN eps", fcInvalidArgument, in.p, res.p, w.p, resOut.p, out.p, tokens, hidden, std::nanf(""), t},
      {"tokens * hidden overflows", fcInvalidArgument, in.p, res.p, w.p, resOut.p, out.p, SIZE_MAX / 8, 64, 1e-6f, t},
      {"normOut == sendbuff", fcInvalidArgument, in.p, res.p, w.p, resOut.p, in.p, tokens, hidden, 1e-6f, t},
      {"residualOut overlaps residual, not in place", fcInvalidArgument, in.p, res.p, w.p, res.c() + 16, out.p,
       2, hidden, 1e-6f, t},
      {"normOut overlaps weight", fcInvalidArgument, in.p, res.p, out.p, resOut.p, out.p, tokens, hidden, 1e-6f, t},
      {"host residual", fcInvalidArgument, in.p, host.data(), w.p, resOut.p, out.p, 1, 8, 1e-6f, t},
      {"unknown datatype", fcInvalidArgument, in.p, res.p, w.p, resOut.p, out.p, tokens, hidden, 1e-6f,
       fcDataType_t(3)},
  };
  for (const Bad& b : bads) {
    const fcResult_t r =
        fcAllReduceResidualRMSNorm(b.in, b.res, b.w, b.ro, b.out, b.tokens, b.hidden, b.eps, b.t, env.comm, nullptr);
    INFO(b.what << ": " << fcGetErrorString(r) << ": " << fcGetLastError(nullptr));
    CHECK(r == b.want);
    CHECK(std::string(fcGetLastError(nullptr)).find("fcAllReduceResidualRMSNorm") != std::string::npos);
  }
  CHECK(fcAllReduceResidualRMSNorm(in.p, res.p, w.p, resOut.p, out.p, 0, hidden, 1e-6f, t, env.comm, nullptr) ==
        fcSuccess);  // tokens 0: a no-op
  CHECK(fcAllReduceResidualRMSNorm(in.p, res.p, w.p, resOut.p, out.p, tokens, hidden, 1e-6f, t, nullptr, nullptr) ==
        fcInvalidArgument);
  CUDA_REQUIRE(cudaDeviceSynchronize());
  const std::vector<char> o = download(out.p, bytes), ro = download(resOut.p, bytes);
  CHECK(std::all_of(o.begin(), o.end(), [](char c) { return c == 0x5a; }));
  CHECK(std::all_of(ro.begin(), ro.end(), [](char c) { return c == 0x5a; }));
}

TEST_CASE("fcAllReduceResidualRMSNormFp8: e4m3 of the normed rows over the scale, saturated, both paths") {
  const GpuEnv& env = gpuEnv();
  struct Case {
    size_t tokens, hidden;
    float scale;
  };
  // 0.005 makes every normed value beyond 2.32 in magnitude exceed 464 (saturated to
  // 448); 400 x 2056 is above the one-kernel limit (384 rows at 2 ranks): the two-shot
  // kernel at 2 ranks (at 4 with FC_ARNORM_ALGO=fused or twoshot), else (and with
  // FC_ARNORM_ALGO=unfused) the all-reduce into the scratch, then the local kernel.
  const Case cases[] = {{3, 4096, 0.005f}, {7, 8192, 1.f}, {400, 2056, 0.05f}};
  for (fcDataType_t t : {fcBfloat16, fcFloat32}) {
    for (const Case& k : cases) {
      const size_t n = k.tokens * k.hidden, bytes = n * fcTypeSize(t);
      const Inputs x(t, k.tokens, k.hidden);
      Buf q(n + 16), scale(sizeof(float));
      CUDA_REQUIRE(cudaMemcpy(scale.p, &k.scale, sizeof(float), cudaMemcpyHostToDevice));
      CUDA_REQUIRE(cudaMemset(q.p, 0x7f, n + 16));  // NaN in e4m3
      CUDA_REQUIRE(cudaDeviceSynchronize());
      FC_REQUIRE(fcAllReduceResidualRMSNormFp8(x.in.p, x.res.p, x.w.p, x.resOut.p, q.p,
                                               static_cast<const float*>(scale.p), k.tokens, k.hidden, 1e-5f, t,
                                               env.comm, env.streams[0]));
      CUDA_REQUIRE(cudaStreamSynchronize(env.streams[0]));
      const std::vector<char> gotRes = download(x.resOut.p, bytes), got = download(q.p, n + 16);
      size_t bad = 0, saturated = 0;
      for (size_t row = 0; row < k.tokens; ++row) {
        double ss = 0;
        for (size_t h = 0; h < k.hidden; ++h) {
          const double x = fcLoad(gotRes.data(), t, row * k.hidden + h);
          ss += x * x;
        }
        const double rstd = 1.0 / std::sqrt(ss / double(k.hidden) + 1e-5);
        for (size_t h = 0; h < k.hidden; ++h) {
          const size_t i = row * k.hidden + h;
          const double v = fcLoad(gotRes.data(), t, i) * rstd * fcLoad(x.weight.data(), t, h) / double(k.scale);
          const double g = e4m3(uint8_t(got[i]));
          if (std::fabs(v) > 448.0 + 16.0) {  // beyond the rounding range of 448: saturated
            ++saturated;
            bad += !(g == (v > 0 ? 448.0 : -448.0));
          } else {
            bad += !(std::fabs(g - v) <= 0.5 * e4m3Ulp(v) + std::fabs(v) * 0x1p-19);
          }
        }
      }
      // Nothing past the end was written.
      bad += !std::isnan(e4m3(uint8_t(got[n])));
      INFO(fcTypeName(t) << " " << k.tokens << " x " << k.hidden << " scale " << k.scale << ": " << saturated
                         << " saturated");
      CHECK(bad == 0);
      if (k.scale < 0.01f) CHECK(saturated > 0);
    }
  }
  // A NULL or misaligned scale is refused.
  Buf a(4096 * 2), b(4096 * 2), wt(4096 * 2), ro(4096 * 2), o(4096), sc(16);
  CHECK(fcAllReduceResidualRMSNormFp8(a.p, b.p, wt.p, ro.p, o.p, nullptr, 1, 4096, 1e-6f, fcBfloat16, env.comm,
                                      nullptr) == fcInvalidArgument);
  CHECK(fcAllReduceResidualRMSNormFp8(a.p, b.p, wt.p, ro.p, o.p, reinterpret_cast<const float*>(sc.c() + 2), 1, 4096,
                                      1e-6f, fcBfloat16, env.comm, nullptr) == fcInvalidArgument);
  CHECK(std::string(fcGetLastError(nullptr)).find("scale") != std::string::npos);
}
