// fcMatmulAllReduce and its residual + RMSNorm forms on real GPUs. A and B are small
// integers (fc_data.h): every rank's product is exact in fp32, so C is known exactly
// (each rank's product rounded once to the dtype, their fp32 sum rounded once); the
// norm forms are checked against a float64 reference with the documented roundings.
// Outputs are poisoned (NaN) before every call; inputs are fresh every call.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "fc_data.h"
#include "fp8_ref.h"
#include "gpu_env.h"

namespace {

float roundTo(fcDataType_t t, float v) {
  char buf[4];
  fcStore(buf, t, 0, v);
  return fcLoad(buf, t, 0);
}

std::vector<char> download(const void* p, size_t bytes) {
  std::vector<char> h(bytes);
  CUDA_REQUIRE(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost));
  return h;
}

void upload(void* dst, const std::vector<char>& h) {
  CUDA_REQUIRE(cudaMemcpy(dst, h.data(), h.size(), cudaMemcpyHostToDevice));
}

// The forced path (FC_MMAR_ALGO) reduce-scatters fp32 partials where FC_MMRS_PARTIALS
// says so: the products then stay unrounded until the end.
bool fp32Products(size_t M, int W) {
  const char* algo = getenv("FC_MMAR_ALGO");
  const char* partials = getenv("FC_MMRS_PARTIALS");
  const bool splits = algo && (std::string(algo) == "fused" || std::string(algo) == "engine") && M % size_t(W) == 0;
  return splits && partials && std::string(partials) == "fp32";
}

// One problem: rank r's A_r [M, K] and B_r from seeds (every rank can compute every
// rank's), and the exact sum over ranks of the rounded products.
struct Problem {
  size_t M, N, K;
  fcOperation_t transB;
  fcDataType_t t;
  uint64_t seedA = freshSeed(), seedB = freshSeed();
  int W = gpuEnv().nranks;
  bool fp32 = fp32Products(M, W);
  // The fp32 sum of the ranks' products as the op sums them (rounded once each, or
  // not at all with fp32 partials), before the final rounding.
  float sum(size_t i, size_t j) const {
    long exact = 0;
    float rounded = 0.f;
    for (int r = 0; r < W; ++r) {
      long s = 0;
      for (size_t k = 0; k < K; ++k) {
        const int b = transB == fcOpN ? fcPatternValue(seedB, r, k * N + j) : fcPatternValue(seedB, r, j * K + k);
        s += long(fcPatternValue(seedA, r, i * K + k)) * b;
      }
      exact += s;
      rounded += roundTo(t, float(s));
    }
    return fp32 ? float(exact) : rounded;
  }
  float c(size_t i, size_t j) const { return roundTo(t, sum(i, j)); }
  void uploadInputs(void* A, void* B, int rank) const {
    upload(A, fcPatternInput(t, M * K, seedA, rank));
    upload(B, fcPatternInput(t, K * N, seedB, rank));
  }
  // The elements to check: all of them for small products, else a sample.
  template <typename F>
  void forElements(F&& f) const {
    if (M * N * K * size_t(W) <= (8u << 20)) {
      for (size_t i = 0; i < M; ++i)
        for (size_t j = 0; j < N; ++j) f(i, j);
      return;
    }
    std::mt19937_64 rng(seedA);
    for (int s = 0; s < 3000; ++s) f(rng() % M, rng() % N);
  }
};

// Wrong elements of C (NaNs anywhere count); the first is named in the next assertion.
size_t checkC(const Problem& p, const std::vector<char>& C) {
  size_t bad = 0;
  for (size_t e = 0; e < p.M * p.N; ++e) bad += std::isnan(fcLoad(C.data(), p.t, e));
  p.forElements([&](size_t i, size_t j) {
    const float got = fcLoad(C.data(), p.t, i * p.N + j), want = p.c(i, j);
    if (got == want) return;
    if (bad++ == 0) UNSCOPED_INFO("first wrong element: row " << i << ", column " << j << ": " << got << ", want "
                                                              << want);
  });
  return bad;
}

// The same bits on every rank: gathered and compared.
int ranksDiffering(const std::vector<char>& bits) {
  const GpuEnv& env = gpuEnv();
  const size_t n = (bits.size() + 15) / 16 * 16;
  DeviceBuffer mine(n), all(n * size_t(env.nranks));
  CUDA_REQUIRE(cudaMemset(mine.p, 0, n));
  CUDA_REQUIRE(cudaMemcpy(mine.p, bits.data(), bits.size(), cudaMemcpyHostToDevice));
  FC_REQUIRE(fcAllGather(mine.p, all.p, n / 2, fcBfloat16, env.comm, nullptr));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  const std::vector<char> g = download(all.p, all.bytes());
  int differing = 0;
  for (int k = 0; k < env.nranks; ++k) differing += memcmp(g.data() + size_t(k) * n, bits.data(), bits.size()) != 0;
  return differing;
}

// The unit in the last place of |x| in t.
double ulp(fcDataType_t t, double x) {
  const double unit = t == fcFloat16 ? 0x1p-10 : 0x1p-7;
  const double tiny = t == fcFloat16 ? 0x1p-24 : 0x1p-133;
  return std::max(tiny, std::ldexp(unit, std::ilogb(std::max(std::fabs(x), 1e-30))));
}

struct Shape {
  size_t M, N, K;
};

}  // namespace

TEST_CASE("fcMatmulAllReduce: exact sums over ranks on every rank, layouts, dtypes, decode and prefill shapes") {
  const GpuEnv& env = gpuEnv();
  // Decode rows (1, 3, 5, 8: the one-kernel path with B^T where N and K are multiples
  // of 8, FMAs or tensor cores by M; 12, 16: its 16-row form where FC_MMAR_ALGO=fused,
  // else cuBLAS + the all-reduce; 70 x 40 is not: cuBLAS + the Lamport one-shot),
  // mid-size, and products past the Lamport one-shot's slot (the two-shot) with M a
  // multiple of every world size (the forced reduce-scatter + all-gather path runs there).
  // 3 x 33032 gives the tensor-core form 1033 tiles of 32 columns (two per slot, the last
  // partial; auto: cuBLAS + the all-reduce, more tiles than CTAs, so the one kernel runs
  // where FC_MMAR_ALGO=fused), 16 x 2056 x 2056 eight warps per tile. 13 x 264 x 520,
  // 40 x 136 x 2056 and 40 x 2880 x 4352 (B^T, K >= 1.5 N, few rows): the decode GEMM
  // (src/gemm/decode) under the all-reduce, 16, 16 and 32 tokens a tile on 132 SMs, the
  // last tiles partial (13 rows under FC_MMAR_ALGO=fused: the one kernel's). Under
  // FC_MMAR_ALGO=decode every B^T shape of up to 256 rows with N a multiple of 8 and tiles
  // in one wave runs the decode engine at 2 ranks (its rows kernel summing only): 100 x
  // 4096 x 136 on 64 x 64 tiles, 200 x 4096 x 136 on 64 x 128 (their last tiles partial),
  // the others on 64 x 16 or 64 x 32. 4 x 520 x 1032 (K >= 1.5 N, 2-8 rows): auto takes the
  // decode GEMM + the all-reduce on sm_90 (the one kernel's MMA form only where that GEMM
  // would be cuBLASLt's), the one kernel where FC_MMAR_ALGO=fused or FC_DECODE_GEMM=0.
  // 1 x 520 x 4104: the FMA form's lanes' rings (K >= 4096; the last batch partial); 6 x
  // 264 x 4104 the MMA form's, each tile's walk along K rotated (K >= 3072; the last tile
  // and batch partial). 2 x 4360 x 520: 137 tiles of 32 columns, more than the kernel's
  // CTAs, so its FMA form at 2 rows where FC_MMAR_ALGO=fused (auto: cuBLAS + the all-reduce).
  const Shape shapes[] = {{1, 72, 40},      {3, 70, 40},       {1, 4096, 512},    {5, 520, 264},
                          {8, 2056, 136},   {12, 4104, 1032},  {16, 1032, 264},   {3, 33032, 136},
                          {16, 2056, 2056}, {96, 520, 136},    {1024, 4224, 200}, {512, 3840, 256},
                          {13, 264, 520},   {40, 136, 2056},   {40, 2880, 4352},  {100, 4096, 136},
                          {200, 4096, 136}, {4, 520, 1032},    {1, 520, 4104},    {6, 264, 4104},
                          {2, 4360, 520}};
  cudaStream_t s = env.streams[0];
  for (fcDataType_t t : {fcBfloat16, fcFloat16})
    for (fcOperation_t op : {fcOpN, fcOpT})
      for (const Shape& sh : shapes) {
        if (!shapeInSanitizerBudget(sh.M * sh.N)) continue;
        const Problem p{sh.M, sh.N, sh.K, op, t};
        const size_t es = 2;
        DeviceBuffer A(sh.M * sh.K * es), B(sh.K * sh.N * es), C(sh.M * sh.N * es + 16);
        p.uploadInputs(A.p, B.p, env.rank);
        CUDA_REQUIRE(cudaMemset(C.p, 0xff, C.bytes()));
        CUDA_REQUIRE(cudaDeviceSynchronize());
        const fcResult_t r = fcMatmulAllReduce(A.p, B.p, C.p, sh.M, sh.N, sh.K, op, t, env.comm, s);
        CUDA_REQUIRE(cudaStreamSynchronize(s));
        CUDA_REQUIRE(cudaGetLastError());
        INFO(fcTypeName(t) << (op == fcOpT ? " B^T" : " B") << " M " << sh.M << " N " << sh.N << " K " << sh.K
                           << ": " << fcGetLastError(nullptr));
        REQUIRE(r == fcSuccess);
        const std::vector<char> got = download(C.p, C.bytes());
        CHECK(checkC(p, got) == 0);
        CHECK(std::isnan(fcLoad(got.data() + sh.M * sh.N * es, t, 0)));  // nothing written past C
        CHECK(ranksDiffering(got) == 0);
      }
}

namespace {

// The norm forms' buffers for one call: the GEMM's, the residual stream, the weight
// (normal values, rounded to t), poisoned outputs.
struct NormInputs {
  Problem p;
  std::vector<char> residual, weight;
  DeviceBuffer A, B, res, w, resOut, out;
  NormInputs(const Shape& sh, fcDataType_t t, size_t outBytes)
      : p{sh.M, sh.N, sh.K, fcOpT, t},
        A(sh.M * sh.K * 2),
        B(sh.K * sh.N * 2),
        res(sh.M * sh.N * 2),
        w(sh.N * 2),
        resOut(sh.M * sh.N * 2),
        out(outBytes + 16) {
    std::mt19937_64 rng(p.seedA ^ 0x5eed);
    std::normal_distribution<float> normal(0.f, 1.f);
    residual.resize(sh.M * sh.N * 2);
    weight.resize(sh.N * 2);
    for (size_t i = 0; i < sh.M * sh.N; ++i) fcStore(residual.data(), t, i, 64.f * normal(rng));
    for (size_t h = 0; h < sh.N; ++h) fcStore(weight.data(), t, h, normal(rng));
    p.uploadInputs(A.p, B.p, gpuEnv().rank);
    upload(res.p, residual);
    upload(w.p, weight);
    CUDA_REQUIRE(cudaMemset(resOut.p, 0xff, resOut.bytes()));
    CUDA_REQUIRE(cudaMemset(out.p, 0xff, out.bytes()));
    CUDA_REQUIRE(cudaDeviceSynchronize());
  }
};

// Wrong residualOut elements: sum + residual, rounded once (one-kernel path) or after
// the sum's own rounding (the larger paths), whichever the element matches within
// those bounds.
size_t checkResidual(const NormInputs& x, const std::vector<char>& got) {
  const Problem& p = x.p;
  size_t bad = 0;
  p.forElements([&](size_t i, size_t j) {
    const size_t e = i * p.N + j;
    const double sum = p.sum(i, j), ref = sum + fcLoad(x.residual.data(), p.t, e);
    const double tol = 0.5 * ulp(p.t, ref) + 0.5 * ulp(p.t, sum);
    const double g = fcLoad(got.data(), p.t, e);
    if (std::fabs(g - ref) <= tol) return;
    if (bad++ == 0) UNSCOPED_INFO("first wrong residualOut: row " << i << ", column " << j << ": " << g << ", want "
                                                                  << ref);
  });
  for (size_t e = 0; e < p.M * p.N; ++e) bad += std::isnan(fcLoad(got.data(), p.t, e));
  return bad;
}

// The normed value of element (i, j) from the rounded residualOut the op wrote.
std::vector<double> rowScales(const NormInputs& x, const std::vector<char>& gotRes, float eps) {
  std::vector<double> rstd(x.p.M);
  for (size_t i = 0; i < x.p.M; ++i) {
    double ss = 0;
    for (size_t h = 0; h < x.p.N; ++h) {
      const double v = fcLoad(gotRes.data(), x.p.t, i * x.p.N + h);
      ss += v * v;
    }
    rstd[i] = 1.0 / std::sqrt(ss / double(x.p.N) + double(eps));
  }
  return rstd;
}

}  // namespace

TEST_CASE("fcMatmulAllReduceResidualRMSNorm: float64 reference, every path, in place, fp8, the same bits") {
  const GpuEnv& env = gpuEnv();
  const float eps = 1e-5f;
  // Decode rows (the one-kernel path with the norm in it: FMAs for one row, tensor
  // cores for 7 and 13, whose last tile of 32 columns is partial at N = 2056), rows for
  // the one Lamport all-reduce + norm kernel, rows past its limit (300 x 2056: the
  // two-shot kernel at 2 ranks, else all-reduce + norm), N not a power of two; 4096 rows:
  // the engine's all-gather at 2 ranks, then the local norm of each half, 4 rows a CTA.
  // K >= 1.5 N at few rows: the decode GEMM (13 x 264 x 520: 16 tokens a tile, 40 x 2880
  // x 4352: 32). Under FC_MMAR_ALGO=decode every shape of up to 256 rows whose tiles fit
  // one wave runs the decode engine at 2 ranks (its GEMM at any K): 64 x 4096 x 136 on 64
  // x 32 tiles, 72 x 4096 x 136 on 64 x 64, 256 x 4096 x 136 on 64 x 128 (a 2 MiB
  // product per rank). 6 x 520 x 1032: auto's decode GEMM + the all-reduce + norm where the
  // one kernel's MMA form would have run before (the forced paths: the one kernel). 2 x
  // 4360 x 264: the one kernel's FMA form at 2 rows where forced (137 tiles of 32 columns).
  // 2 x 4360, 1 x 8192 and 2 x 12296: the norm behind the one kernel with rows of 545 packs
  // (a pack a thread, 576-thread CTAs), 1024 (two a thread of 512) and 1537 (two a thread of
  // 800, threads 737-799 with one).
  const Shape shapes[] = {{1, 4096, 512},  {7, 2056, 264},   {13, 2056, 520},   {64, 4096, 136},
                          {300, 2056, 136}, {512, 3840, 256}, {4096, 1032, 136}, {13, 264, 520},
                          {40, 2880, 4352}, {1, 520, 1032},   {72, 4096, 136},   {256, 4096, 136},
                          {6, 520, 1032},   {2, 4360, 264},   {1, 8192, 136},   {2, 12296, 136}};
  for (fcDataType_t t : {fcBfloat16, fcFloat16})
    for (const Shape& sh : shapes)
      for (int form = 0; form < 3; ++form) {  // 0: normOut, 1: in place (residualOut == residual), 2: fp8
        if (!shapeInSanitizerBudget(sh.M * sh.N)) continue;
        const size_t n = sh.M * sh.N, bytes = n * 2;
        NormInputs x(sh, t, form == 2 ? n : bytes);
        const float scale = 0.05f;
        DeviceBuffer scaleBuf(sizeof(float));
        CUDA_REQUIRE(cudaMemcpy(scaleBuf.p, &scale, sizeof(float), cudaMemcpyHostToDevice));
        // A cudaMemcpy from pageable memory may return before its DMA has landed, and the
        // op runs on a non-blocking stream: wait for the scale before the fp8 form reads it.
        CUDA_REQUIRE(cudaDeviceSynchronize());
        void* ro = form == 1 ? x.res.p : x.resOut.p;
        const fcResult_t r =
            form == 2 ? fcMatmulAllReduceResidualRMSNormFp8(x.A.p, x.B.p, x.res.p, x.w.p, ro, x.out.p,
                                                            static_cast<const float*>(scaleBuf.p), sh.M, sh.N, sh.K,
                                                            eps, fcOpT, t, env.comm, env.streams[1])
                      : fcMatmulAllReduceResidualRMSNorm(x.A.p, x.B.p, x.res.p, x.w.p, ro, x.out.p, sh.M, sh.N,
                                                         sh.K, eps, fcOpT, t, env.comm, env.streams[1]);
        CUDA_REQUIRE(cudaStreamSynchronize(env.streams[1]));
        CUDA_REQUIRE(cudaGetLastError());
        INFO(fcTypeName(t) << " M " << sh.M << " N " << sh.N << " K " << sh.K << " form " << form << ": "
                           << fcGetLastError(nullptr));
        REQUIRE(r == fcSuccess);
        const std::vector<char> gotRes = download(ro, bytes), got = download(x.out.p, x.out.bytes());
        CHECK(checkResidual(x, gotRes) == 0);
        const std::vector<double> rstd = rowScales(x, gotRes, eps);
        size_t bad = 0;
        for (size_t i = 0; i < sh.M; ++i)
          for (size_t h = 0; h < sh.N; ++h) {
            const size_t e = i * sh.N + h;
            const double ref = fcLoad(gotRes.data(), t, e) * rstd[i] * fcLoad(x.weight.data(), t, h);
            if (form == 2) {
              const double v = ref / double(scale), g = e4m3(uint8_t(got[e]));
              bad += std::fabs(v) > 464.0 ? !(g == (v > 0 ? 448.0 : -448.0))
                                          : !(std::fabs(g - v) <= 0.5 * e4m3Ulp(v) + std::fabs(v) * 0x1p-19);
            } else {
              const double g = fcLoad(got.data(), t, e);
              bad += !(std::fabs(g - ref) <= 0.5 * ulp(t, ref) + std::fabs(ref) * 0x1p-19);
            }
          }
        CHECK(bad == 0);
        CHECK(uint8_t(got[form == 2 ? n : bytes]) == 0xff);  // nothing written past normOut
        CHECK(ranksDiffering(got) == 0);
        CHECK(ranksDiffering(gotRes) == 0);
      }
}

namespace {

// Captures `issue` (three calls of the ops, their results) on s into one graph, then
// replays it three times, each after `prepare` (fresh inputs, poisoned outputs) and
// followed by `check`; the communicator has no asynchronous error at the end.
void replayCaptured(cudaStream_t s, const std::function<std::array<fcResult_t, 3>()>& issue,
                    const std::function<void()>& prepare, const std::function<void()>& check) {
  const GpuEnv& env = gpuEnv();
  CUDA_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const std::array<fcResult_t, 3> r = issue();
  cudaGraph_t graph;
  CUDA_REQUIRE(cudaStreamEndCapture(s, &graph));
  INFO(fcGetLastError(nullptr));
  REQUIRE((r[0] == fcSuccess && r[1] == fcSuccess && r[2] == fcSuccess));
  cudaGraphExec_t exec;
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    prepare();
    CUDA_REQUIRE(cudaDeviceSynchronize());
    CUDA_REQUIRE(cudaGraphLaunch(exec, s));
    CUDA_REQUIRE(cudaStreamSynchronize(s));
    INFO("replay " << replay);
    check();
  }
  fcResult_t async = fcInternalError;
  FC_REQUIRE(fcCommGetAsyncError(env.comm, &async));
  CHECK(async == fcSuccess);
  CUDA_REQUIRE(cudaGraphExecDestroy(exec));
  CUDA_REQUIRE(cudaGraphDestroy(graph));
}

}  // namespace

TEST_CASE("fcMatmulAllReduce: both forms back to back in a CUDA graph, replayed with fresh inputs") {
  const GpuEnv& env = gpuEnv();
  const Shape small{8, 4096, 512}, large{512, 2056, 136};
  const fcDataType_t t = fcBfloat16;
  cudaStream_t s = env.streams[1];
  DeviceBuffer A(small.M * small.K * 2), B(small.K * small.N * 2), C(small.M * small.N * 2);
  NormInputs x(large, t, large.M * large.N * 2);
  Problem p{small.M, small.N, small.K, fcOpT, t};
  replayCaptured(
      s,
      [&] {
        return std::array<fcResult_t, 3>{
            fcMatmulAllReduce(A.p, B.p, C.p, small.M, small.N, small.K, fcOpT, t, env.comm, s),
            fcMatmulAllReduceResidualRMSNorm(x.A.p, x.B.p, x.res.p, x.w.p, x.resOut.p, x.out.p, large.M, large.N,
                                             large.K, 1e-6f, fcOpT, t, env.comm, s),
            fcMatmulAllReduce(A.p, B.p, C.p, small.M, small.N, small.K, fcOpT, t, env.comm, s)};
      },
      [&] {
        p = Problem{small.M, small.N, small.K, fcOpT, t};
        p.uploadInputs(A.p, B.p, env.rank);
        x.p = Problem{large.M, large.N, large.K, fcOpT, t};
        x.p.uploadInputs(x.A.p, x.B.p, env.rank);
        CUDA_REQUIRE(cudaMemset(C.p, 0xff, C.bytes()));
        CUDA_REQUIRE(cudaMemset(x.resOut.p, 0xff, x.resOut.bytes()));
      },
      [&] {
        CHECK(checkC(p, download(C.p, C.bytes())) == 0);
        CHECK(checkResidual(x, download(x.resOut.p, x.resOut.bytes())) == 0);
      });
}

TEST_CASE("fcMatmulAllReduceResidualRMSNorm: three calls of decode shapes in a CUDA graph, each its own inputs") {
  // At a shape the decode GEMM takes (K >= 1.5 N, few rows): the GEMM + all-reduce + norm
  // path, or under FC_MMAR_ALGO=decode the decode engine, whose GEMM pushes into the
  // peer's Lamport buffer the device's buffer index names (a different one each call of
  // a replay, the same three in every replay). Each call has its own inputs and outputs,
  // so a tile pushed into or read from another call's buffer shows as a wrong element.
  const GpuEnv& env = gpuEnv();
  const Shape sh{24, 520, 1032};
  const fcDataType_t t = fcBfloat16;
  cudaStream_t s = env.streams[1];
  NormInputs x0(sh, t, sh.M * sh.N * 2), x1(sh, t, sh.M * sh.N * 2), x2(sh, t, sh.M * sh.N * 2);
  NormInputs* xs[3] = {&x0, &x1, &x2};
  auto call = [&](NormInputs& x) {
    return fcMatmulAllReduceResidualRMSNorm(x.A.p, x.B.p, x.res.p, x.w.p, x.resOut.p, x.out.p, sh.M, sh.N, sh.K,
                                            1e-6f, fcOpT, t, env.comm, s);
  };
  replayCaptured(
      s, [&] { return std::array<fcResult_t, 3>{call(x0), call(x1), call(x2)}; },
      [&] {
        for (NormInputs* x : xs) {
          x->p = Problem{sh.M, sh.N, sh.K, fcOpT, t};
          x->p.uploadInputs(x->A.p, x->B.p, env.rank);
          CUDA_REQUIRE(cudaMemset(x->resOut.p, 0xff, x->resOut.bytes()));
        }
      },
      [&] {
        for (NormInputs* x : xs) CHECK(checkResidual(*x, download(x->resOut.p, x->resOut.bytes())) == 0);
      });
}

TEST_CASE("fcMatmulAllReduce: the decode engine's two forms in turn in a CUDA graph, each its own inputs") {
  // FC_MMAR_ALGO=decode, set while a second communicator initialises: at 2 ranks the
  // plain form and the norm form both take the decode engine at 24 x 520 x 1032 (one wave
  // of 16-token tiles at any K), its GEMM pushing into the peer's Lamport Rows buffer the
  // device's buffer index names and the rows kernel finishing (the plain form: its sum
  // stage only, into C). Plain, norm, plain in one capture: the three calls walk the three
  // buffers, each with its own inputs, so a tile pushed into or read from another call's
  // buffer, or a plain call's finisher running a norm stage, shows as a wrong element.
  // Elsewhere (4 ranks) the same calls take auto's path: the same results.
  const GpuEnv& env = gpuEnv();
  ForcedComm decode("FC_MMAR_ALGO", "decode");
  fcComm_t comm = decode.comm;
  const Shape sh{24, 520, 1032};
  const fcDataType_t t = fcFloat16;
  cudaStream_t s = env.streams[0];
  DeviceBuffer A0(sh.M * sh.K * 2), B0(sh.K * sh.N * 2), C0(sh.M * sh.N * 2);
  DeviceBuffer A2(sh.M * sh.K * 2), B2(sh.K * sh.N * 2), C2(sh.M * sh.N * 2);
  NormInputs x(sh, t, sh.M * sh.N * 2);
  Problem p0{sh.M, sh.N, sh.K, fcOpT, t}, p2{sh.M, sh.N, sh.K, fcOpT, t};
  replayCaptured(
      s,
      [&] {
        return std::array<fcResult_t, 3>{
            fcMatmulAllReduce(A0.p, B0.p, C0.p, sh.M, sh.N, sh.K, fcOpT, t, comm, s),
            fcMatmulAllReduceResidualRMSNorm(x.A.p, x.B.p, x.res.p, x.w.p, x.resOut.p, x.out.p, sh.M, sh.N, sh.K,
                                             1e-6f, fcOpT, t, comm, s),
            fcMatmulAllReduce(A2.p, B2.p, C2.p, sh.M, sh.N, sh.K, fcOpT, t, comm, s)};
      },
      [&] {
        p0 = Problem{sh.M, sh.N, sh.K, fcOpT, t};
        p0.uploadInputs(A0.p, B0.p, env.rank);
        p2 = Problem{sh.M, sh.N, sh.K, fcOpT, t};
        p2.uploadInputs(A2.p, B2.p, env.rank);
        x.p = Problem{sh.M, sh.N, sh.K, fcOpT, t};
        x.p.uploadInputs(x.A.p, x.B.p, env.rank);
        for (const DeviceBuffer* c : {&C0, &C2, &x.resOut}) CUDA_REQUIRE(cudaMemset(c->p, 0xff, c->bytes()));
      },
      [&] {
        for (auto [c, p] : {std::pair{&C0, &p0}, std::pair{&C2, &p2}}) {
          const std::vector<char> got = download(c->p, c->bytes());
          CHECK(checkC(*p, got) == 0);
          CHECK(ranksDiffering(got) == 0);
        }
        CHECK(checkResidual(x, download(x.resOut.p, x.resOut.bytes())) == 0);
      });
  fcResult_t async = fcInternalError;
  FC_REQUIRE(fcCommGetAsyncError(comm, &async));
  CHECK(async == fcSuccess);
}

TEST_CASE("fcMatmulAllReduce: the GEMM + all-reduce path first in a CUDA graph and again behind another op") {
  // Captured, the path's collective also depends on what preceded the op (an event
  // recorded before its GEMM: comm/ops.cc, commDependOnStart). First in the capture that
  // event holds no node; the second call's holds the all-reduce issued between them.
  // 96 x 520 x 136 takes cuBLASLt + the Lamport one-shot under auto (the forced paths
  // run their own forms of it); replayed with fresh inputs, the outputs poisoned.
  const GpuEnv& env = gpuEnv();
  const Shape sh{96, 520, 136};
  const fcDataType_t t = fcBfloat16;
  const size_t n = 4096;
  cudaStream_t s = env.streams[1];
  DeviceBuffer A(sh.M * sh.K * 2), B(sh.K * sh.N * 2), C1(sh.M * sh.N * 2), C2(sh.M * sh.N * 2);
  DeviceBuffer x(n * 2), y(n * 2);
  upload(x.p, fcPatternInput(t, n, 7, env.rank));
  Problem p{sh.M, sh.N, sh.K, fcOpT, t};
  replayCaptured(
      s,
      [&] {
        return std::array<fcResult_t, 3>{fcMatmulAllReduce(A.p, B.p, C1.p, sh.M, sh.N, sh.K, fcOpT, t, env.comm, s),
                                         fcAllReduce(x.p, y.p, n, t, fcSum, env.comm, s),
                                         fcMatmulAllReduce(A.p, B.p, C2.p, sh.M, sh.N, sh.K, fcOpT, t, env.comm, s)};
      },
      [&] {
        p = Problem{sh.M, sh.N, sh.K, fcOpT, t};
        p.uploadInputs(A.p, B.p, env.rank);
        for (const DeviceBuffer* c : {&C1, &C2}) CUDA_REQUIRE(cudaMemset(c->p, 0xff, c->bytes()));
      },
      [&] {
        for (const DeviceBuffer* c : {&C1, &C2}) {
          const std::vector<char> got = download(c->p, c->bytes());
          CHECK(checkC(p, got) == 0);
          CHECK(ranksDiffering(got) == 0);
        }
      });
}

TEST_CASE("fcMatmulAllReduce: the engine's all-gather back to back with other ops on the channel, exact") {
  // FC_MMAR_ALGO=engine, set while a second communicator initialises: at 2 ranks (the
  // epilogue add on) its GEMM pushes into the peer's workspace behind an entry barrier
  // and the peer's sums are read from ours after the final barrier (design.md, "The
  // engine's all-gather"); an all-reduce and the norm form between reuse the same
  // workspace on the same stream, and the second plain call must see none of it. A
  // third plain call writes into C in symmetric memory (fcMemAlloc): there the peer
  // stores its block's sums straight into our C (no copy after the op), between calls
  // whose sums go through the workspace.
  // Elsewhere (4 ranks, ranks sharing a GPU) the same calls take the engine without
  // the gather, then an all-gather: the same results.
  const GpuEnv& env = gpuEnv();
  ForcedComm engine("FC_MMAR_ALGO", "engine");
  fcComm_t comm = engine.comm;
  const Shape sh{1024, 1032, 136};  // blocks of whole 128-row tiles at 2 and 4 ranks
  const fcDataType_t t = fcBfloat16;
  const size_t cBytes = sh.M * sh.N * 2, arCount = 256 * 1024;
  cudaStream_t s = env.streams[0];
  const Problem p1{sh.M, sh.N, sh.K, fcOpT, t}, p2{sh.M, sh.N, sh.K, fcOpT, t};
  DeviceBuffer A1(sh.M * sh.K * 2), B1(sh.K * sh.N * 2), C1(cBytes), A2(sh.M * sh.K * 2), B2(sh.K * sh.N * 2),
      C2(cBytes), arIn(arCount * 2), arOut(arCount * 2);
  NormInputs x(sh, t, cBytes);
  p1.uploadInputs(A1.p, B1.p, env.rank);
  p2.uploadInputs(A2.p, B2.p, env.rank);
  const uint64_t arSeed = freshSeed();
  upload(arIn.p, fcPatternInput(t, arCount, arSeed, env.rank));
  void* C3 = nullptr;  // symmetric, for the A2 / B2 product
  FC_REQUIRE(fcMemAlloc(comm, &C3, cBytes));
  for (void* p : {C1.p, C2.p, arOut.p, C3}) CUDA_REQUIRE(cudaMemset(p, 0xff, p == arOut.p ? arOut.bytes() : cBytes));
  CUDA_REQUIRE(cudaDeviceSynchronize());  // the uploads and poisonings (legacy stream) before s's work
  for (int round = 0; round < 3; ++round) {
    FC_REQUIRE(fcMatmulAllReduce(A1.p, B1.p, C1.p, sh.M, sh.N, sh.K, fcOpT, t, comm, s));
    FC_REQUIRE(fcAllReduce(arIn.p, arOut.p, arCount, t, fcSum, comm, s));
    FC_REQUIRE(fcMatmulAllReduce(A2.p, B2.p, C3, sh.M, sh.N, sh.K, fcOpT, t, comm, s));
    FC_REQUIRE(fcMatmulAllReduceResidualRMSNorm(x.A.p, x.B.p, x.res.p, x.w.p, x.resOut.p, x.out.p, sh.M, sh.N,
                                                sh.K, 1e-6f, fcOpT, t, comm, s));
    FC_REQUIRE(fcMatmulAllReduce(A2.p, B2.p, C2.p, sh.M, sh.N, sh.K, fcOpT, t, comm, s));
  }
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  fcResult_t async = fcInternalError;
  FC_REQUIRE(fcCommGetAsyncError(comm, &async));
  INFO(fcGetLastError(nullptr));
  CHECK(async == fcSuccess);
  CHECK(checkC(p1, download(C1.p, C1.bytes())) == 0);
  CHECK(checkC(p2, download(C2.p, C2.bytes())) == 0);
  CHECK(checkC(p2, download(C3, cBytes)) == 0);
  CHECK(download(C3, cBytes) == download(C2.p, cBytes));  // the same bits either way
  CHECK(fcPatternSumError(download(arOut.p, arOut.bytes()).data(), t, arCount, arSeed, env.nranks) == 0.0);
  CHECK(checkResidual(x, download(x.resOut.p, x.resOut.bytes())) == 0);
  CHECK(ranksDiffering(download(C2.p, C2.bytes())) == 0);
  FC_REQUIRE(fcMemFree(comm, C3));
}

TEST_CASE("fcMatmulAllReduce: bad shapes and arguments are rejected and touch nothing") {
  const GpuEnv& env = gpuEnv();
  const size_t M = 16, N = 64, K = 32, es = 2;
  DeviceBuffer A(M * K * es), B(K * N * es), C(M * N * es), res(M * N * es), w(N * es), ro(M * N * es),
      out(M * N * es);
  for (const DeviceBuffer* b : {&C, &ro, &out}) CUDA_REQUIRE(cudaMemset(b->p, 0x5a, b->bytes()));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  cudaStream_t s = env.streams[0];
  const fcDataType_t t = fcBfloat16;
  auto rejects = [&](fcResult_t r, const char* fn, const char* what) {
    INFO(what << ": " << fcGetLastError(nullptr));
    CHECK(r == fcInvalidArgument);
    CHECK(std::string(fcGetLastError(nullptr)).find(fn) != std::string::npos);
  };
  const char* mar = "fcMatmulAllReduce";
  rejects(fcMatmulAllReduce(A.p, B.p, C.p, 0, N, K, fcOpN, t, env.comm, s), mar, "M = 0");
  rejects(fcMatmulAllReduce(A.p, B.p, C.p, M, N, 0, fcOpN, t, env.comm, s), mar, "K = 0");
  rejects(fcMatmulAllReduce(A.p, B.p, C.p, M, N, K, fcOpN, fcFloat32, env.comm, s), mar, "fp32");
  rejects(fcMatmulAllReduce(A.p, B.p, C.p, M, N, K, fcOperation_t(2), t, env.comm, s), mar, "transB");
  rejects(fcMatmulAllReduce(nullptr, B.p, C.p, M, N, K, fcOpN, t, env.comm, s), mar, "A NULL");
  rejects(fcMatmulAllReduce(A.p, B.p, nullptr, M, N, K, fcOpN, t, env.comm, s), mar, "C NULL");
  rejects(fcMatmulAllReduce(A.p, B.p, C.c() + 1, M, N, K, fcOpN, t, env.comm, s), mar, "misaligned");
  rejects(fcMatmulAllReduce(A.p, C.p, C.p, M, N, K, fcOpN, t, env.comm, s), mar, "B overlaps C");
  rejects(fcMatmulAllReduce(A.p, B.p, C.p, SIZE_MAX / 4, N, K, fcOpN, t, env.comm, s), mar, "overflow");
  CHECK(fcMatmulAllReduce(A.p, B.p, C.p, M, N, K, fcOpN, t, nullptr, s) == fcInvalidArgument);
  const char* norm = "fcMatmulAllReduceResidualRMSNorm";
  rejects(fcMatmulAllReduceResidualRMSNorm(A.p, B.p, nullptr, w.p, ro.p, out.p, M, N, K, 1e-6f, fcOpT, t, env.comm,
                                           s),
          norm, "residual NULL");
  rejects(fcMatmulAllReduceResidualRMSNorm(A.p, B.p, res.p, w.p, ro.p, nullptr, M, N, K, 1e-6f, fcOpT, t, env.comm,
                                           s),
          norm, "normOut NULL");
  rejects(fcMatmulAllReduceResidualRMSNorm(A.p, B.p, res.p, w.p, ro.p, out.p, M, 60, K, 1e-6f, fcOpT, t, env.comm,
                                           s),
          norm, "N * 2 not a multiple of 16");
  rejects(fcMatmulAllReduceResidualRMSNorm(A.p, B.p, res.p, w.p, ro.p, out.p, M, N, K, -1.f, fcOpT, t, env.comm, s),
          norm, "eps < 0");
  rejects(fcMatmulAllReduceResidualRMSNorm(A.p, B.p, res.p, w.p, ro.p, ro.p, M, N, K, 1e-6f, fcOpT, t, env.comm, s),
          norm, "normOut overlaps residualOut");
  rejects(fcMatmulAllReduceResidualRMSNorm(A.p, B.p, res.p, w.p, ro.p, A.p, M, N, K, 1e-6f, fcOpT, t, env.comm, s),
          norm, "normOut overlaps A");
  rejects(fcMatmulAllReduceResidualRMSNormFp8(A.p, B.p, res.p, w.p, ro.p, out.p, nullptr, M, N, K, 1e-6f, fcOpT, t,
                                              env.comm, s),
          "fcMatmulAllReduceResidualRMSNormFp8", "scale NULL");
  CUDA_REQUIRE(cudaDeviceSynchronize());
  for (const DeviceBuffer* b : {&C, &ro, &out}) {
    const std::vector<char> h = download(b->p, b->bytes());
    CHECK(std::all_of(h.begin(), h.end(), [](char c) { return c == 0x5a; }));
  }
}
