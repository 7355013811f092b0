// fc-bench mmrs: fcMatmulReduceScatter against the GEMM alone and the unfused
// GEMM + reduce-scatter, in one run.
//
// Columns per shape (M, N, K) and transB:
//   gemm      the GEMM alone, [M, K] x op(B) -> [M, N] (the same cuBLASLt call,
//             through a one-rank communicator of our own)
//   nccl      that GEMM, then ncclReduceScatter of the bf16 products (when NCCL loads)
//   fc        that GEMM, then fcReduceScatter
//   fused     fcMatmulReduceScatter
//   fused/gemm, unfused/fused (NCCL's unfused when present, else ours), TFLOP/s of
//   the fused op (2MNK per rank), and relerr: max relative error of 1000 sampled
//   elements of C against the exact result (integer inputs; each rank's partial
//   rounded to the type first unless FC_MMRS_PARTIALS=fp32; must be 0).
//   Then eager (--eager 1): the fused op and the unfused one (NCCL's when present)
//   called eagerly: call + sync, back to back, host time per call (timeEager).
//   Last, engine: the fused op on a communicator made with FC_MMRS_ALGO=engine (the
//   persistent GEMM engine, where it applies), its time over the GEMM's, its relerr.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>

#include "bench.h"
#include "fc_data.h"

namespace {

// One problem's operands (GemmOperands, C [M/W, N]) and its exact check.
struct MmrsOperands : GemmOperands {
  MmrsOperands(const Ctx& ctx, size_t M_, size_t N_, size_t K_, fcDataType_t t)
      : GemmOperands(ctx, M_, N_, K_, t, M_ / size_t(ctx.nranks)) {}

  // C from fcMatmulReduceScatter on `comm` (C poisoned first) against the exact sum at
  // `samples` sampled elements (each rank's partial rounded to the type first unless
  // fp32Partials; one final rounding): max relative error, max over ranks.
  // `a`: where A is read from (NULL: ours; else a copy of it, e.g. in symmetric memory).
  double relerr(fcComm_t comm, fcOperation_t op, int samples, bool fp32Partials, const void* a = nullptr) const {
    const size_t W = size_t(c.nranks), ms = M / W, es = fcTypeSize(type);
    CUDA_OK(cudaMemsetAsync(C, 0xff, ms * N * es, c.stream));
    FC_OK(fcMatmulReduceScatter(a ? a : A, B, C, M, N, K, op, type, comm, c.stream));
    std::vector<char> got(ms * N * es);
    CUDA_OK(cudaMemcpyAsync(got.data(), C, got.size(), cudaMemcpyDeviceToHost, c.stream));
    CUDA_OK(cudaStreamSynchronize(c.stream));
    double err = 0;
    std::mt19937_64 rng(seedA + size_t(op));
    for (int s = 0; s < samples; ++s) {
      const size_t i = rng() % ms, j = rng() % N, row = size_t(c.rank) * ms + i;
      const Sum sum = sumAt(op, row, j);
      const double want = roundTo(type, fp32Partials ? sum.exact : sum.ofRounded);
      const double e = std::fabs(double(fcLoad(got.data(), type, i * N + j)) - want) /
                       std::max(1.0, std::fabs(sum.exact));
      if (!(e <= err)) err = std::isnan(e) ? 1e30 : e;
    }
    return maxOverRanks(c, err);
  }
};

}  // namespace

int benchMmrs(Ctx& c, const Options& o, const std::string& shapes, const std::string& transB) {
  const fcDataType_t type = parseType(o.dtype);
  const size_t es = fcTypeSize(type), W = size_t(c.nranks);
  std::string why;
  const bool haveNccl = o.nccl && (c.ncclComm != nullptr || initNccl(c, &why));
  fcComm_t solo = soloComm();
  // The fused op on the persistent GEMM engine (FC_MMRS_ALGO=engine; where it does not
  // apply, the op's fallback).
  fcComm_t engineComm = commWithEnv(c, "FC_MMRS_ALGO", "engine");
  printGemmHeader(c, o, "mmrs", haveNccl, why);
  int failures = 0;
  for (const GemmShape& sh : parseShapes(shapes, W)) {
    const size_t M = sh.M, N = sh.N, K = sh.K;
    const size_t ms = M / W;
    const char* partials = getenv("FC_MMRS_PARTIALS");
    const bool fp32Partials = partials != nullptr && std::string(partials) == "fp32";
    const MmrsOperands x(c, M, N, K, type);
    void *A = x.A, *B = x.B, *P = x.P, *C = x.C, *Crs;
    CUDA_OK(cudaMalloc(&Crs, ms * N * es));
    for (fcOperation_t op : {fcOpN, fcOpT}) {
      if ((op == fcOpN && transB == "t") || (op == fcOpT && transB == "n")) continue;
      // Integer products: exact. Each rank's partial rounded to the type unless the
      // communicator keeps fp32 partials (FC_MMRS_PARTIALS=fp32); one final rounding.
      auto relerrOn = [&](fcComm_t comm) { return x.relerr(comm, op, 1000, fp32Partials); };
      const double relerr = relerrOn(c.comm), engineRelerr = relerrOn(engineComm);
      auto gemm = [&] { FC_OK(fcAllGatherMatmul(A, B, P, nullptr, M, N, K, op, type, solo, c.stream)); };
      auto fcOp = [&] {
        gemm();
        FC_OK(fcReduceScatter(P, Crs, ms * N, type, fcSum, c.comm, c.stream));
      };
      auto ncclOp = [&] {
        gemm();
        if (c.nccl.reduceScatter(P, Crs, ms * N, int(type), 0, c.ncclComm, c.stream) != 0) exit(1);
      };
      auto fusedOp = [&] { FC_OK(fcMatmulReduceScatter(A, B, C, M, N, K, op, type, c.comm, c.stream)); };
      auto engineOp = [&] { FC_OK(fcMatmulReduceScatter(A, B, C, M, N, K, op, type, engineComm, c.stream)); };
      std::vector<std::function<void()>> timed = {gemm, fcOp, fusedOp, engineOp};
      if (haveNccl) timed.push_back(ncclOp);
      std::vector<double> us = timeGraphsMax(c, o, timed);
      const double gemmUs = us[0], fcUs = us[1], fusedUs = us[2], engineUs = us[3], ncclUs = haveNccl ? us[4] : 0;
      const FusedEager eager = haveNccl ? timeFusedEager(c, o, fusedOp, ncclOp) : timeFusedEager(c, o, fusedOp, fcOp);
      const bool ok = relerr == 0.0 && engineRelerr == 0.0;
      failures += !ok;
      if (c.rank == 0) {
        const double unfused = haveNccl ? ncclUs : fcUs;
        printf("%zu,%zu,%zu,%s,%s,%.1f,%.1f,%.1f,%.1f,%.3f,%.3f,%.1f,%g,%s,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.3f,%g\n", M, N,
               K, fcTypeName(type), op == fcOpN ? "N" : "T", gemmUs, ncclUs, fcUs, fusedUs, fusedUs / gemmUs,
               unfused / fusedUs, 2.0 * double(M) * double(N) * double(K) / (fusedUs * 1e6), relerr,
               ok ? "OK" : "FAIL", eager.fused.syncUs, eager.fused.b2bUs, eager.fused.hostUs, eager.unfused.syncUs,
               eager.unfused.b2bUs, engineUs, engineUs / gemmUs, engineRelerr);
        fflush(stdout);
      }
    }
    CUDA_OK(cudaFree(Crs));
  }
  FC_OK(fcCommDestroy(solo));
  FC_OK(fcCommDestroy(engineComm));
  return failures ? 1 : 0;
}

// fc-bench mmrs --forms / --msweep: fcMatmulReduceScatter as callers call it (issue
// 45). Per shape and transB, one interleaved run of:
//   gemm       the GEMM alone, [M, K] x op(B) -> the [M, N] partial (one-rank communicator)
//   comm       the reduce-scatter of the [M, N] partials alone, the fastest of
//              CommCandidates (comm_from names it)
//   nccl+gemm  the GEMM, then ncclReduceScatter (when NCCL loads); fc+gemm: then
//              fcReduceScatter
//   one op per form: A plain (cudaMalloc) or symmetric (fcMemAlloc of the run's
//              communicator); the auto choice
// and one row per form: op / GEMM, op / (GEMM + NCCL) (0 without NCCL), fixed = op -
// max(gemm, comm). relerr: 1000 sampled elements against the exact sum (as benchMmrs).
int benchMmrsForms(Ctx& c, const Options& o, const std::string& shapes, const std::string& transB,
                   const std::vector<CallerForm>& forms) {
  const fcDataType_t type = parseType(o.dtype);
  const size_t es = fcTypeSize(type), W = size_t(c.nranks);
  std::string why;
  const bool haveNccl = o.nccl && (c.ncclComm != nullptr || initNccl(c, &why));
  fcComm_t solo = soloComm();
  CommCandidates comm(c, "FC_REDUCE_SCATTER_ALGO");
  printFormsHeader(c, o, "mmrs", haveNccl, why);
  const char* partials = getenv("FC_MMRS_PARTIALS");
  const bool fp32Partials = partials != nullptr && std::string(partials) == "fp32";
  int failures = 0;
  for (const GemmShape& sh : parseShapes(shapes, W)) {
    const size_t M = sh.M, N = sh.N, K = sh.K;
    const size_t ms = M / W;
    const MmrsOperands x(c, M, N, K, type);
    void *A = x.A, *B = x.B, *P = x.P, *C = x.C, *Crs, *As;
    CUDA_OK(cudaMalloc(&Crs, ms * N * es));
    FC_OK(fcMemAlloc(c.comm, &As, M * K * es));
    CUDA_OK(cudaMemcpyAsync(As, A, M * K * es, cudaMemcpyDeviceToDevice, c.stream));
    // The candidates' sendbuffs hold a partial (P's contents do not change the times).
    comm.bind(P, M * N * es);
    const Options t = timingFor(o, 2.0 * double(M) * double(N) * double(K));
    for (fcOperation_t op : {fcOpN, fcOpT}) {
      if ((op == fcOpN && transB == "t") || (op == fcOpT && transB == "n")) continue;
      std::vector<double> relerr;
      for (const CallerForm& f : forms) relerr.push_back(x.relerr(c.comm, op, 1000, fp32Partials, f.symmetric ? As : A));
      auto gemm = [&] { FC_OK(fcAllGatherMatmul(A, B, P, nullptr, M, N, K, op, type, solo, c.stream)); };
      // The columns in printFormRows' order: the GEMM alone, the unfused pair, the
      // communication candidates, the forms, NCCL + the GEMM.
      std::vector<std::function<void()>> timed = {gemm, [&] {
                                                    gemm();
                                                    FC_OK(fcReduceScatter(P, Crs, ms * N, type, fcSum, c.comm, c.stream));
                                                  }};
      for (size_t i = 0; i < comm.comms.size(); ++i)
        timed.push_back(
            [&, i] { FC_OK(fcReduceScatter(comm.send[i], Crs, ms * N, type, fcSum, comm.comms[i], c.stream)); });
      for (const CallerForm& f : forms) {
        const void* a = f.symmetric ? As : A;
        timed.push_back([&, a] { FC_OK(fcMatmulReduceScatter(a, B, C, M, N, K, op, type, c.comm, c.stream)); });
      }
      if (haveNccl)
        timed.push_back([&] {
          gemm();
          if (c.nccl.reduceScatter(P, Crs, ms * N, int(type), 0, c.ncclComm, c.stream) != 0) exit(1);
        });
      std::vector<double> us = timeGraphs(c, t, timed);
      maxOverRanks(c, us);
      failures += printFormRows(c, sh, op, type, false, forms, relerr, us, comm, haveNccl, t);
    }
    comm.unbind();
    FC_OK(fcMemFree(c.comm, As));
    CUDA_OK(cudaFree(Crs));
  }
  FC_OK(fcCommDestroy(solo));
  return failures ? 1 : 0;
}

// fc-bench mmrsstages: where the GEMM + reduce-scatter engine path's time goes (issue
// 17). Per shape (B [N, K]), every column on its own communicator, timed interleaved:
//   gemm       the GEMM alone, [M, K] x B^T (cuBLASLt, through a one-rank communicator)
//   engine     the engine path (FC_MMRS_ALGO=engine) summing after its GEMM
//              (FC_MMRS_ENGINE_STAGES=full)
//   no-gate    its pulls start without waiting for the peers' tiles (FC_MMRS_ENGINE_STAGES)
//   no-pull    the waits for the peers' tiles, no pulls
//   gemm-only  neither: the engine's GEMM (signalling its tiles), the flags or the sum,
//              the barrier
//   epilogue-add  the engine's default flow: at 2 ranks the peer's partial read in place
//              and added in the GEMM's epilogue instead of pulled and summed after it;
//              at 3-8 ranks the chain of fp32 running sums, each tile adding the next
//              rank's (FC_MMRS_ENGINE_STAGES=epilogue-add)
//   epilogue-local  at 2 ranks the epilogue add with our tiles adding a block of our own
//              workspace, without waiting: no NVLink traffic (FC_MMRS_ENGINE_STAGES)
//   epilogue-push  at 2 ranks our partial of the peer's block pushed into its workspace
//              from the epilogue, ours adding the peer's from our own (fcMatmulAllReduce's
//              engine without its gather)
//   lead0, lead2  the epilogue add in the plain order (the peer's block, then ours) and
//              with the blocks' pieces interleaved 2 of the peer's ahead
//              (FC_MMRS_ENGINE_LEAD; epilogue-add and auto take the tuning rule's order:
//              interleaved where K <= 2048)
//   auto       fcMatmulReduceScatter's own choice
// Read: engine - no-gate = the waiting for the peers' tiles the GEMM does not hide;
// engine - no-pull = the pulls' exposed time; gemm-only - gemm = the engine GEMM's own
// cost over cuBLASLt plus the fixed costs (counter reset, the sum of the partials, the
// final barrier); engine - epilogue-add = what adding the peer's partial in the GEMM's
// epilogue saves; epilogue-add - epilogue-local = what the peer's partial crossing NVLink
// (and the waits for it) costs. Every column but engine, epilogue-add, epilogue-push,
// lead0, lead2 and auto computes wrong results; those are checked exactly (relerr:
// integer inputs, each rank's partial rounded once).
int benchMmrsStages(Ctx& c, const Options& o, const std::string& shapes) {
  const fcDataType_t type = parseType(o.dtype);
  const size_t W = size_t(c.nranks);
  std::vector<fcComm_t> comms =
      engineStageComms(c, "FC_MMRS_ALGO", "FC_MMRS_ENGINE_STAGES",
                       {"full", "no-gate", "no-pull", "gemm-only", "epilogue-add", "epilogue-local", "epilogue-push"});
  for (const char* lead : {"0", "2"}) {
    ScopedEnv engine("FC_MMRS_ALGO", "engine");
    comms.push_back(commWithEnv(c, "FC_MMRS_ENGINE_LEAD", lead));
  }
  fcComm_t solo = soloComm();
  if (c.rank == 0)
    printf("# fc-bench mmrsstages: %s, %s, B [N, K], the engine path with stages left out; graph of %d calls, "
           "%d replays (median), %d warm-up\nM,N,K,gemm_us,engine_us,no-gate_us,no-pull_us,gemm-only_us,epilogue-add_us,"
           "epilogue-local_us,epilogue-push_us,lead0_us,lead2_us,auto_us,relerr\n",
           describeRun(c).c_str(), fcTypeName(type), o.iters, o.replays, o.warmup);
  int failures = 0;
  for (const GemmShape& sh : parseShapes(shapes, W * 128)) {
    const size_t M = sh.M, N = sh.N, K = sh.K;
    const MmrsOperands x(c, M, N, K, type);
    void *A = x.A, *B = x.B, *P = x.P, *C = x.C;
    // 200 sampled elements, the partials rounded to the type (the default).
    auto relerrOn = [&](fcComm_t comm) { return x.relerr(comm, fcOpT, 200, false); };
    const double relerr = std::max({relerrOn(comms[0]), relerrOn(comms[4]), relerrOn(comms[6]), relerrOn(comms[7]),
                                    relerrOn(comms[8]), relerrOn(c.comm)});
    std::vector<std::function<void()>> ops = {
        [&] { FC_OK(fcAllGatherMatmul(A, B, P, nullptr, M, N, K, fcOpT, type, solo, c.stream)); }};
    for (fcComm_t comm : comms)
      ops.push_back([&, comm] { FC_OK(fcMatmulReduceScatter(A, B, C, M, N, K, fcOpT, type, comm, c.stream)); });
    ops.push_back([&] { FC_OK(fcMatmulReduceScatter(A, B, C, M, N, K, fcOpT, type, c.comm, c.stream)); });
    std::vector<double> us = timeGraphsMax(c, o, ops);
    failures += relerr != 0.0;
    char err[32];
    snprintf(err, sizeof err, "%g", relerr);
    printStagesRow(c, M, N, K, us, 1, err);
  }
  for (fcComm_t comm : comms) FC_OK(fcCommDestroy(comm));
  FC_OK(fcCommDestroy(solo));
  return failures ? 1 : 0;
}
