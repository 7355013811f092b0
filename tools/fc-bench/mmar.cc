// fc-bench mmar: fcMatmulAllReduce and fcMatmulAllReduceResidualRMSNorm (the
// row-parallel layer of tensor parallelism: o_proj, down_proj) against the GEMM alone
// and the unfused sequences, in one run (issue 42).
//
// Per shape (M, N, K; A [M, K] on every rank, B an nn.Linear weight [N, K] unless
// --transB n) and form (op mmar: fcMatmulAllReduce; mmarnorm: fcMatmulAllReduce-
// ResidualRMSNorm, eps 1e-6; --norm 0 | 1 | both), columns timed in interleaved graph
// replays (timeGraphs), then eagerly:
//   gemm    the GEMM alone, [M, K] x op(B) -> [M, N]: cuBLASLt's, through a one-rank
//           communicator of our own (fcMatmulAllReduce at one rank is the GEMM; its decode
//           GEMM off: soloComm), as the unfused columns below run it. The fused op runs
//           the decode GEMM where the tuning table takes it (src/gemm/decode), so that at
//           one rank (-n 1) the fused column is that GEMM alone
//   nccl    that GEMM, then ncclAllReduce of the products (when NCCL loads). NCCL has no
//           residual + RMSNorm: for mmarnorm this column leaves the norm out (a lower
//           bound of GEMM + NCCL + any norm kernel)
//   fc      that GEMM, then fcAllReduce (mmar) or fcAllReduceResidualRMSNorm (mmarnorm)
//   fused   the fused op, the communicator's path (FC_MMAR_ALGO, auto by default)
//   ar      the collective alone on the products: fcAllReduce, or (mmarnorm)
//           fcAllReduceResidualRMSNorm (its time beside the GEMM's bounds the fused op)
//   fused_symc (--symmetric-c, the plain form): the fused op with C from fcMemAlloc of
//           the communicator (checked to be the fc column's bits); 0 where not timed
//   fused/gemm, fused - gemm (us), best unfused / fused (the faster of nccl and fc; for
//   mmarnorm fc, the one unfused column with the norm),
//   relerr: the fused op's outputs at 1000 sampled elements against the exact result
//   (integer inputs): C must equal the sum of each rank's product rounded to the type,
//   rounded once (0); residualOut that sum + residual rounded once, or the sum rounded
//   first (the paths' two forms), exactly; normOut within 2^-7 of the float64 RMSNorm of
//   the returned residualOut (relerr 0 when all pass);
//   vs_fc: max |fused - fc| / max(1, |fc|) over every output element (mmar: C, which
//   must be the same bits; mmarnorm: residualOut and normOut);
//   fused_over_bound: fused / max(gemm, ar), the large-M target's ratio;
//   eager (--eager 1): each column once + cudaStreamSynchronize (median wall time), and
//   the fused op's back-to-back and host time per call (timeEager).
// Times: median of -r graph replays of -n calls, max over ranks. --cold-weight: each
// call reads its own copy of B (WeightRing below), as a model's decode step does; the
// default reuses one B, which the graph's back-to-back calls then find in L2.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench.h"
#include "fc_data.h"

namespace {

constexpr float kEps = 1e-6f;
constexpr int kSamples = 1000;

// The row-parallel layers of issue 42 at TP 2, (N, K): Llama-3-8B o_proj and
// down_proj, Qwen2.5-32B o_proj and down_proj.
constexpr size_t kLayers[][2] = {{4096, 2048}, {4096, 7168}, {5120, 2560}, {5120, 13824}};

std::string defaultShapes(const std::string& tokens) {
  std::string s;
  for (const auto& nk : kLayers)
    for (size_t m : parseList(tokens))
      s += std::to_string(m) + "," + std::to_string(nk[0]) + "," + std::to_string(nk[1]) + ";";
  s.pop_back();
  return s;
}

std::vector<char> download(const Ctx& c, const void* d, size_t bytes) {
  std::vector<char> h(bytes);
  CUDA_OK(cudaMemcpyAsync(h.data(), d, bytes, cudaMemcpyDeviceToHost, c.stream));
  CUDA_OK(cudaStreamSynchronize(c.stream));
  return h;
}

// max |a - b| / max(1, |b|) over n elements (NaN: 1e30).
double maxDiff(const std::vector<char>& a, const std::vector<char>& b, fcDataType_t type, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = fcLoad(a.data(), type, i), y = fcLoad(b.data(), type, i);
    const double e = std::fabs(x - y) / std::max(1.0, std::fabs(y));
    if (!(e <= worst)) worst = std::isnan(e) ? 1e30 : e;
  }
  return worst;
}

// --cold-weight: copies of B that the calls take in turn, together at least twice the
// L2, so that each call finds its weight evicted (a graph of back-to-back calls with one B
// reads it from L2 wherever it fits: up to ~50 MiB on an H200, e.g. issue 42's short-K
// layers 4096 x 2048 and 5120 x 2560). A model's decode step reads each layer's own
// weight once, long after its last step, from HBM: the cold form is the one a server
// sees. Copy 0 is B itself, every copy holds the same values, so the check and the bits
// are unchanged.
class WeightRing {
 public:
  WeightRing(const void* B, size_t bytes, bool cold) : copies_{const_cast<void*>(B)} {
    if (!cold) return;
    int dev = 0, l2 = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    const size_t want = std::max<size_t>(2, (2 * size_t(l2) + bytes - 1) / bytes);
    for (size_t i = 1; i < want; ++i) {
      void* p = nullptr;
      CUDA_OK(cudaMalloc(&p, bytes));
      CUDA_OK(cudaMemcpy(p, B, bytes, cudaMemcpyDeviceToDevice));
      copies_.push_back(p);
    }
  }
  ~WeightRing() {
    for (size_t i = 1; i < copies_.size(); ++i) cudaFree(copies_[i]);
  }
  WeightRing(const WeightRing&) = delete;
  WeightRing& operator=(const WeightRing&) = delete;
  // The B of the next call (a graph's captured calls each get their own).
  const void* next() { return copies_[next_++ % copies_.size()]; }

 private:
  std::vector<void*> copies_;
  size_t next_ = 0;
};

}  // namespace

int benchMmar(Ctx& c, const Options& o, const std::string& shapesArg, const std::string& tokens,
              const std::string& transB, const std::string& normArg, bool symmetricC, bool coldWeight) {
  const fcDataType_t type = parseType(o.dtype);
  const size_t es = fcTypeSize(type);
  const std::string shapes = shapesArg.empty() ? defaultShapes(tokens) : shapesArg;
  std::string why;
  const bool haveNccl = o.nccl && (c.ncclComm != nullptr || initNccl(c, &why));
  fcComm_t solo = soloComm();
  const char* algo = getenv("FC_MMAR_ALGO");
  if (c.rank == 0) {
    printf("# fc-bench mmar: %s, %s, graph of %d calls, %d replays (median, interleaved), %d warm-up; "
           "FC_MMAR_ALGO=%s; NCCL: %s; nccl_us is the GEMM + ncclAllReduce only, for mmarnorm too (no norm); "
           "weight %s\n",
           describeRun(c).c_str(), fcTypeName(type), o.iters, o.replays, o.warmup,
           algo && *algo ? algo : "auto", describeNccl(c, haveNccl, why).c_str(),
           coldWeight ? "cold (--cold-weight: each call its own copy of B, the copies twice the L2)"
                      : "hot (one B for every call)");
    printf("op,M,N,K,type,transB,gemm_us,nccl_us,fc_us,fused_us,fused_over_gemm,fused_minus_gemm_us,"
           "unfused_over_fused,relerr,vs_fc,check,gemm_eager_us,nccl_eager_us,fc_eager_us,fused_eager_us,"
           "fused_b2b_us,fused_host_us,ar_us,fused_over_bound,fused_symc_us\n");
  }
  int failures = 0;
  for (const GemmShape& sh : parseShapes(shapes, 1)) {
    const size_t M = sh.M, N = sh.N, K = sh.K;
    const size_t n = M * N, bytes = n * es;
    GemmOperands x(c, M, N, K, type, M);
    void *A = x.A, *P = x.P, *C = x.C;
    WeightRing weights(x.B, N * K * es, coldWeight);
    // D: the unfused columns' output; R, Wt: the residual and the norm's weight (the same
    // on every rank); F1, F2 the fused norm form's residualOut and normOut, U1, U2 the
    // unfused one's.
    void *D, *R, *Wt, *F1, *F2, *U1, *U2;
    for (void** p : {&D, &R, &F1, &F2, &U1, &U2}) CUDA_OK(cudaMalloc(p, bytes));
    void* Cs = nullptr;  // --symmetric-c: the plain form's C in symmetric memory
    if (symmetricC) FC_OK(fcMemAlloc(c.comm, &Cs, bytes));
    CUDA_OK(cudaMalloc(&Wt, N * es));
    // uploadNormInputs fills its first buffer with this rank's pattern too: P, which
    // every GEMM overwrites.
    const NormInputs ni = uploadNormInputs(c, type, M, N, P, R, Wt);
    for (fcOperation_t op : {fcOpN, fcOpT}) {
      if ((op == fcOpN && transB == "t") || (op == fcOpT && transB == "n")) continue;
      for (int norm : {0, 1}) {
        if ((norm == 0 && normArg == "1") || (norm == 1 && normArg == "0")) continue;
        auto gemm = [&] { FC_OK(fcMatmulAllReduce(A, weights.next(), P, M, N, K, op, type, solo, c.stream)); };
        std::function<void()> fcOp, fusedOp;
        if (norm) {
          fcOp = [&] {
            gemm();
            FC_OK(fcAllReduceResidualRMSNorm(P, R, Wt, U1, U2, M, N, kEps, type, c.comm, c.stream));
          };
          fusedOp = [&] {
            FC_OK(fcMatmulAllReduceResidualRMSNorm(A, weights.next(), R, Wt, F1, F2, M, N, K, kEps, op, type, c.comm,
                                                   c.stream));
          };
        } else {
          fcOp = [&] {
            gemm();
            FC_OK(fcAllReduce(P, D, n, type, fcSum, c.comm, c.stream));
          };
          fusedOp = [&] { FC_OK(fcMatmulAllReduce(A, weights.next(), C, M, N, K, op, type, c.comm, c.stream)); };
        }
        auto ncclOp = [&] {
          gemm();
          if (int r = c.nccl.allReduce(P, D, n, int(type), 0, c.ncclComm, c.stream); r != 0) {
            fprintf(stderr, "fc-bench: NCCL call failed: %s\n", c.nccl.getErrorString(r));
            exit(1);
          }
        };
        // The check: outputs poisoned, the fused op and the fc column once each.
        for (void* p : {C, D, F1, F2, U1, U2}) CUDA_OK(cudaMemsetAsync(p, 0xff, bytes, c.stream));
        fusedOp();
        fcOp();
        const std::vector<char> got = download(c, norm ? F1 : C, bytes), ref = download(c, norm ? U1 : D, bytes);
        double vsFc = maxDiff(got, ref, type, n), err = 0;
        std::vector<char> gotNorm;
        if (norm) {
          gotNorm = download(c, F2, bytes);
          vsFc = std::max(vsFc, maxDiff(gotNorm, download(c, U2, bytes), type, n));
        }
        std::map<size_t, double> rstd;  // of the sampled rows of the returned residualOut
        std::mt19937_64 rng(x.seedA + size_t(op) * 2 + size_t(norm));
        for (int s = 0; s < kSamples; ++s) {
          const size_t i = rng() % M, j = rng() % N, at = i * N + j;
          const GemmOperands::Sum sum = x.sumAt(op, i, j);
          const double g = fcLoad(got.data(), type, at);
          double e;
          if (!norm) {
            e = std::fabs(g - roundTo(type, sum.ofRounded)) / std::max(1.0, std::fabs(sum.exact));
          } else {
            // The sum of the rounded products plus the residual, rounded once (the
            // one-kernel paths), or the sum rounded first (the others): either exactly.
            const double res = fcLoad(ni.residual.data(), type, at), want = sum.ofRounded + res;
            const bool either = g == roundTo(type, want) || g == roundTo(type, roundTo(type, sum.ofRounded) + res);
            e = either ? 0 : std::fabs(g - want) / std::max(1.0, std::fabs(want));
            if (rstd.count(i) == 0) {
              double sq = 0;
              for (size_t k = 0; k < N; ++k) sq += std::pow(double(fcLoad(got.data(), type, i * N + k)), 2);
              rstd[i] = 1.0 / std::sqrt(sq / double(N) + kEps);
            }
            const double wantNorm = g * rstd[i] * fcLoad(ni.weight.data(), type, j);
            const double en =
                std::fabs(fcLoad(gotNorm.data(), type, at) - wantNorm) / std::max(std::fabs(wantNorm), 1e-3);
            e = std::max(e, en <= 0x1p-7 ? 0 : en);
          }
          if (!(e <= err)) err = std::isnan(e) ? 1e30 : e;
        }
        const double relerr = maxOverRanks(c, err);
        vsFc = maxOverRanks(c, vsFc);
        // The plain form into symmetric C: the same bits as the fc column.
        std::function<void()> symcOp;
        if (!norm && Cs != nullptr) {
          symcOp = [&] { FC_OK(fcMatmulAllReduce(A, weights.next(), Cs, M, N, K, op, type, c.comm, c.stream)); };
          CUDA_OK(cudaMemsetAsync(Cs, 0xff, bytes, c.stream));
          symcOp();
          vsFc = std::max(vsFc, maxOverRanks(c, maxDiff(download(c, Cs, bytes), ref, type, n)));
        }
        const bool ok = relerr == 0.0 && (norm || vsFc == 0.0);
        failures += !ok;

        // The collective alone on the [M, N] products (the target's other bound): the
        // all-reduce, or the all-reduce + residual + RMSNorm.
        auto arOp = [&] {
          if (norm) FC_OK(fcAllReduceResidualRMSNorm(P, R, Wt, U1, U2, M, N, kEps, type, c.comm, c.stream));
          else FC_OK(fcAllReduce(P, D, n, type, fcSum, c.comm, c.stream));
        };
        std::vector<std::function<void()>> timed = {gemm, fcOp, fusedOp, arOp};
        if (haveNccl) timed.push_back(ncclOp);
        if (symcOp) timed.push_back(symcOp);
        std::vector<double> us = timeGraphsMax(c, o, timed);
        const double gemmUs = us[0], fcUs = us[1], fusedUs = us[2], arUs = us[3], ncclUs = haveNccl ? us[4] : 0;
        const double symcUs = symcOp ? us.back() : 0;
        EagerTimes eager[5];  // in timed's order: gemm, fc, fused, ar, nccl
        if (o.eager)
          for (size_t k = 0; k < (haveNccl ? 5u : 4u); ++k)
            if (k != 3) eager[k] = timeEager(c, o, timed[k]);
        if (c.rank == 0) {
          const double bestUnfused = haveNccl && !norm ? std::min(ncclUs, fcUs) : fcUs;
          printf("%s,%zu,%zu,%zu,%s,%s,%.2f,%.2f,%.2f,%.2f,%.3f,%.2f,%.3f,%g,%g,%s,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,"
                 "%.2f,%.3f,%.2f\n",
                 norm ? "mmarnorm" : "mmar", M, N, K, fcTypeName(type), op == fcOpN ? "N" : "T", gemmUs, ncclUs,
                 fcUs, fusedUs, fusedUs / gemmUs, fusedUs - gemmUs, bestUnfused / fusedUs, relerr, vsFc,
                 ok ? "OK" : "FAIL", eager[0].syncUs, eager[4].syncUs, eager[1].syncUs, eager[2].syncUs,
                 eager[2].b2bUs, eager[2].hostUs, arUs, fusedUs / std::max(gemmUs, arUs), symcUs);
          fflush(stdout);
        }
      }
    }
    for (void* p : {D, R, Wt, F1, F2, U1, U2}) CUDA_OK(cudaFree(p));
    if (Cs != nullptr) FC_OK(fcMemFree(c.comm, Cs));
  }
  FC_OK(fcCommDestroy(solo));
  return failures ? 1 : 0;
}

// fc-bench mmarstages: where fcMatmulAllReduce's engine path (2 ranks: the GEMM with the
// reduce-scatter and the all-gather in its epilogue) spends its time, issue 42's large-M
// target. Per shape (B [N, K], the plain form), every column on its own communicator,
// timed interleaved:
//   gemm        cuBLASLt's GEMM alone (a one-rank communicator)
//   engine_gemm the engine's CUTLASS GEMM alone (a one-rank all-gather + GEMM engine)
//   ar          fcAllReduce of the [M, N] products alone
//   full        the engine path (FC_MMAR_ALGO=engine, FC_MMAR_ENGINE_STAGES=full)
//   local       every store into the peer's workspace made into ours instead: no NVLink
//               traffic; the waits and signals stay
//   no-gather   our block's sums not pushed to the peer
//   no-wait     our block's tiles do not wait for the peer's partials
//   no-copy     the peer's rows not copied into C after the GEMM
//   gemm-only   all four: the engine's GEMM, its signals and the barriers
//   bare        gemm-only without the barriers and the counters' reset: the GEMM kernel
//               alone, as the op launches it (its tiles, scheduler and epilogue)
//   auto        fcMatmulAllReduce's own choice
// Read: full - local = what the NVLink stores cost beyond their time under the GEMM;
// full - no-gather = the all-gather half; full - no-wait = the waits the GEMM does not
// hide; full - no-copy = the copy; gemm-only - bare = the barriers and the reset; bare -
// engine_gemm = the kernel's own cost over the GEMM (tile shape, scheduler, signals, our
// tiles' reads of the peer's partial).
// Every column but full and auto computes wrong results; those two are checked against
// GEMM + fcAllReduce (the same bits).
int benchMmarStages(Ctx& c, const Options& o, const std::string& shapes) {
  const fcDataType_t type = parseType(o.dtype);
  const size_t es = fcTypeSize(type);
  const std::vector<fcComm_t> comms =
      engineStageComms(c, "FC_MMAR_ALGO", "FC_MMAR_ENGINE_STAGES",
                       {"full", "local", "no-gather", "no-wait", "no-copy", "gemm-only", "bare"});
  fcComm_t solo = soloComm(), soloEngine = soloComm("engine");
  if (c.rank == 0)
    printf("# fc-bench mmarstages: %s, %s, B [N, K], fcMatmulAllReduce's engine path with parts left out; graph of "
           "%d calls, %d replays (median), %d warm-up\nM,N,K,gemm_us,engine_gemm_us,ar_us,full_us,local_us,"
           "no-gather_us,no-wait_us,no-copy_us,gemm-only_us,bare_us,auto_us,check\n",
           describeRun(c).c_str(), fcTypeName(type), o.iters, o.replays, o.warmup);
  int failures = 0;
  for (const GemmShape& sh : parseShapes(shapes, size_t(c.nranks) * 128)) {
    const size_t M = sh.M, N = sh.N, K = sh.K, n = M * N, bytes = n * es;
    GemmOperands x(c, M, N, K, type, M);
    void *A = x.A, *B = x.B, *P = x.P, *C = x.C, *D;
    CUDA_OK(cudaMalloc(&D, bytes));
    // The check: GEMM + fcAllReduce, then the full engine path and auto, the same bits.
    bool ok = true;
    FC_OK(fcMatmulAllReduce(A, B, P, M, N, K, fcOpT, type, solo, c.stream));
    FC_OK(fcAllReduce(P, D, n, type, fcSum, c.comm, c.stream));
    const std::vector<char> ref = download(c, D, bytes);
    for (fcComm_t comm : {comms[0], c.comm}) {
      CUDA_OK(cudaMemsetAsync(C, 0xff, bytes, c.stream));
      FC_OK(fcMatmulAllReduce(A, B, C, M, N, K, fcOpT, type, comm, c.stream));
      ok = ok && maxOverRanks(c, maxDiff(download(c, C, bytes), ref, type, n)) == 0.0;
    }
    failures += !ok;
    std::vector<std::function<void()>> ops = {
        [&] { FC_OK(fcMatmulAllReduce(A, B, P, M, N, K, fcOpT, type, solo, c.stream)); },
        [&] { FC_OK(fcAllGatherMatmul(A, B, P, nullptr, M, N, K, fcOpT, type, soloEngine, c.stream)); },
        [&] { FC_OK(fcAllReduce(P, D, n, type, fcSum, c.comm, c.stream)); }};
    for (fcComm_t comm : comms)
      ops.push_back([&, comm] { FC_OK(fcMatmulAllReduce(A, B, C, M, N, K, fcOpT, type, comm, c.stream)); });
    ops.push_back([&] { FC_OK(fcMatmulAllReduce(A, B, C, M, N, K, fcOpT, type, c.comm, c.stream)); });
    std::vector<double> us = timeGraphsMax(c, o, ops);
    printStagesRow(c, M, N, K, us, 1, ok ? "OK" : "FAIL");
    CUDA_OK(cudaFree(D));
  }
  for (fcComm_t comm : comms) FC_OK(fcCommDestroy(comm));
  FC_OK(fcCommDestroy(solo));
  FC_OK(fcCommDestroy(soloEngine));
  return failures ? 1 : 0;
}
