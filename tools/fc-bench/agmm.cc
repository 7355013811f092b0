// fc-bench agmm: fcAllGatherMatmul against the GEMM alone and the unfused
// all-gather + GEMM, in one run.
//
// Columns per shape (M, N, K) and transB:
//   gemm      the GEMM alone on the full gathered A: fcAllGatherMatmul on a
//             one-rank communicator of our own, i.e. the same cuBLASLt call
//   nccl+gemm ncclAllGather into [M, K], then that GEMM (when NCCL loads)
//   fc+gemm   fcAllGather into [M, K], then that GEMM
//   fused     fcAllGatherMatmul (Agathered NULL), the auto choice (unfused,
//             pipeline or engine)
//   engine    the same on a communicator made with FC_AGMM_ALGO=engine (the
//             persistent GEMM engine), with its own relerr
//   cutlass   the engine's GEMM alone (a one-rank communicator with the engine)
//   pipeline  the fused op with the cuBLASLt pipeline forced (FC_AGMM_ALGO=pipeline)
//   fused/gemm, unfused/fused (NCCL's unfused when present, else ours), TFLOP/s of
//   the fused op, and relerr = max |C_fused - C_gemm| / max |C_gemm| (auto and
//   pipeline; the engine has its own; inputs are
//   small integers, so the products are exact and relerr must be 0).
//   Then eager (--eager 1): the fused op and the unfused one (NCCL's when present)
//   called eagerly: call + sync, back to back, host time per call (timeEager).
// Times: median of -r graph replays of -n calls, the columns replayed in turn within
// each round (timeGraphs: no column gains from a cooler GPU), max over ranks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <sstream>

#include "bench.h"
#include "fc_data.h"

namespace {

using Shape = GemmShape;

double maxAbs(const std::vector<char>& v, fcDataType_t t, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double(fcLoad(v.data(), t, i))));
  return m;
}

// One shape's buffers on this rank, inputs uploaded: A (our [M/W, K] shard), B ([K, N]
// or [N, K]), G (the gathered [M, K]), C and Cref ([M, N]). Small-integer patterns, so
// that every product is exact.
struct Operands {
  const Ctx& c;
  fcDataType_t type;
  Shape sh;
  size_t es, shardElems;
  void *A, *B, *G, *C, *Cref;
  std::vector<char> ref;      // the reference C (reference())
  std::vector<char> refA;     // the gathered A (reference())
  double refMax = 1;

  Operands(const Ctx& ctx, fcDataType_t t, const Shape& s)
      : c(ctx), type(t), sh(s), es(fcTypeSize(t)), shardElems(s.M / size_t(ctx.nranks) * s.K) {
    if (sh.M % size_t(c.nranks)) {
      fprintf(stderr, "fc-bench: M = %zu is not a multiple of %d ranks\n", sh.M, c.nranks);
      exit(2);
    }
    CUDA_OK(cudaMalloc(&A, shardElems * es));
    CUDA_OK(cudaMalloc(&B, sh.K * sh.N * es));
    CUDA_OK(cudaMalloc(&G, sh.M * sh.K * es));
    CUDA_OK(cudaMalloc(&C, sh.M * sh.N * es));
    CUDA_OK(cudaMalloc(&Cref, sh.M * sh.N * es));
    const uint64_t seed = fcSplitMix(sh.M * 131 + sh.N * 7 + sh.K);
    std::vector<char> h = fcPatternInput(type, shardElems, seed, c.rank);
    CUDA_OK(cudaMemcpyAsync(A, h.data(), h.size(), cudaMemcpyHostToDevice, c.stream));
    h = fcPatternInput(type, sh.K * sh.N, seed + 1, 0);
    CUDA_OK(cudaMemcpyAsync(B, h.data(), h.size(), cudaMemcpyHostToDevice, c.stream));
  }
  ~Operands() {
    for (void* p : {A, B, G, C, Cref}) CUDA_OK(cudaFree(p));
  }

  // The reference for op: gather A into G, then the GEMM alone on `solo` into Cref.
  void reference(fcOperation_t op, fcComm_t solo) {
    FC_OK(fcAllGather(A, G, shardElems, type, c.comm, c.stream));
    FC_OK(fcAllGatherMatmul(G, B, Cref, nullptr, sh.M, sh.N, sh.K, op, type, solo, c.stream));
    ref.resize(sh.M * sh.N * es);
    refA.resize(sh.M * sh.K * es);
    CUDA_OK(cudaMemcpyAsync(ref.data(), Cref, ref.size(), cudaMemcpyDeviceToHost, c.stream));
    CUDA_OK(cudaMemcpyAsync(refA.data(), G, refA.size(), cudaMemcpyDeviceToHost, c.stream));
    CUDA_OK(cudaStreamSynchronize(c.stream));
    refMax = std::max(1.0, maxAbs(ref, type, sh.M * sh.N));
  }

  // max |C - C_ref| / max |C_ref| of fcAllGatherMatmul on `on` (C poisoned first), max
  // over ranks.
  double relerrOn(fcOperation_t op, fcComm_t on) { return relerrOf(op, on, A, nullptr); }

  // The same for a caller form: A read from `a` (ours or a symmetric copy), and where
  // `agathered` is given (poisoned first), the gathered A there must equal the
  // reference's bit for bit (else the error is 1).
  double relerrOf(fcOperation_t op, fcComm_t on, const void* a, void* agathered) {
    std::vector<char> got(ref.size());
    CUDA_OK(cudaMemsetAsync(C, 0xff, got.size(), c.stream));
    if (agathered) CUDA_OK(cudaMemsetAsync(agathered, 0xff, refA.size(), c.stream));
    FC_OK(fcAllGatherMatmul(a, B, C, agathered, sh.M, sh.N, sh.K, op, type, on, c.stream));
    CUDA_OK(cudaMemcpyAsync(got.data(), C, got.size(), cudaMemcpyDeviceToHost, c.stream));
    std::vector<char> gotA(agathered ? refA.size() : 0);
    if (agathered) CUDA_OK(cudaMemcpyAsync(gotA.data(), agathered, gotA.size(), cudaMemcpyDeviceToHost, c.stream));
    CUDA_OK(cudaStreamSynchronize(c.stream));
    double err = agathered && memcmp(gotA.data(), refA.data(), refA.size()) != 0 ? 1 : 0;
    // Exact products: C is bit-equal to the reference when right; the element loop
    // (seconds at M 32768) only measures how wrong it is.
    if (memcmp(got.data(), ref.data(), ref.size()) != 0) {
      double e = 0;
      for (size_t i = 0; i < sh.M * sh.N; ++i) {
        const double d = std::fabs(double(fcLoad(got.data(), type, i)) - double(fcLoad(ref.data(), type, i)));
        if (!(d <= e)) e = std::isnan(d) ? 1e30 : d;
      }
      err = std::max(err, e / refMax);
    }
    return maxOverRanks(c, err);
  }
};

}  // namespace

int benchAgmm(Ctx& c, const Options& o, const std::string& shapes, const std::string& transB) {
  const fcDataType_t type = parseType(o.dtype);
  const size_t W = size_t(c.nranks);
  std::string why;
  const bool haveNccl = o.nccl && (c.ncclComm != nullptr || initNccl(c, &why));
  fcComm_t solo = soloComm();
  fcComm_t engineComm = commWithEnv(c, "FC_AGMM_ALGO", "engine");
  fcComm_t soloEngine = soloComm("engine");  // the CUTLASS GEMM alone
  fcComm_t pipelineComm = commWithEnv(c, "FC_AGMM_ALGO", "pipeline");  // the cuBLASLt pipeline wherever it fits
  printGemmHeader(c, o, "agmm", haveNccl, why);
  int failures = 0;
  for (const Shape& sh : parseShapes(shapes, size_t(c.nranks))) {
    Operands x(c, type, sh);
    void *A = x.A, *B = x.B, *G = x.G, *C = x.C, *Cref = x.Cref;
    const size_t ms = sh.M / W;
    for (fcOperation_t op : {fcOpN, fcOpT}) {
      if ((op == fcOpN && transB == "t") || (op == fcOpT && transB == "n")) continue;
      x.reference(op, solo);
      const double relerr = std::max(x.relerrOn(op, c.comm), x.relerrOn(op, pipelineComm));
      const double engineRelerr = x.relerrOn(op, engineComm);

      auto gemmOp = [&] { FC_OK(fcAllGatherMatmul(G, B, Cref, nullptr, sh.M, sh.N, sh.K, op, type, solo, c.stream)); };
      auto fcOp = [&] {
        FC_OK(fcAllGather(A, G, ms * sh.K, type, c.comm, c.stream));
        gemmOp();
      };
      auto ncclOp = [&] {
        if (c.nccl.allGather(A, G, ms * sh.K, int(type), c.ncclComm, c.stream) != 0) exit(1);
        gemmOp();
      };
      auto fusedOp = [&] { FC_OK(fcAllGatherMatmul(A, B, C, nullptr, sh.M, sh.N, sh.K, op, type, c.comm, c.stream)); };
      auto engineOp = [&] {
        FC_OK(fcAllGatherMatmul(A, B, C, nullptr, sh.M, sh.N, sh.K, op, type, engineComm, c.stream));
      };
      auto pipelineOp = [&] {
        FC_OK(fcAllGatherMatmul(A, B, C, nullptr, sh.M, sh.N, sh.K, op, type, pipelineComm, c.stream));
      };
      auto cutlassOp = [&] {
        FC_OK(fcAllGatherMatmul(G, B, Cref, nullptr, sh.M, sh.N, sh.K, op, type, soloEngine, c.stream));
      };
      std::vector<std::function<void()>> timed = {gemmOp, fcOp, fusedOp, engineOp, cutlassOp, pipelineOp};
      if (haveNccl) timed.push_back(ncclOp);
      std::vector<double> us = timeGraphsMax(c, o, timed);
      const double gemmUs = us[0], fcUs = us[1], fusedUs = us[2], engineUs = us[3], cutlassUs = us[4];
      const double pipelineUs = us[5], ncclUs = haveNccl ? us[6] : 0;
      const FusedEager eager = haveNccl ? timeFusedEager(c, o, fusedOp, ncclOp) : timeFusedEager(c, o, fusedOp, fcOp);
      const bool ok = relerr == 0.0 && engineRelerr == 0.0;
      failures += !ok;
      if (c.rank == 0) {
        const double unfused = haveNccl ? ncclUs : fcUs;
        printf("%zu,%zu,%zu,%s,%s,%.1f,%.1f,%.1f,%.1f,%.3f,%.3f,%.1f,%g,%s,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.3f,%g,%.1f,"
               "%.1f\n",
               sh.M, sh.N, sh.K,
               fcTypeName(type), op == fcOpN ? "N" : "T", gemmUs, ncclUs, fcUs, fusedUs, fusedUs / gemmUs,
               unfused / fusedUs, 2.0 * double(sh.M) * double(sh.N) * double(sh.K) / (fusedUs * 1e6), relerr,
               ok ? "OK" : "FAIL", eager.fused.syncUs, eager.fused.b2bUs, eager.fused.hostUs, eager.unfused.syncUs,
               eager.unfused.b2bUs, engineUs, engineUs / gemmUs, engineRelerr, cutlassUs, pipelineUs);
        fflush(stdout);
      }
    }
  }
  FC_OK(fcCommDestroy(pipelineComm));
  FC_OK(fcCommDestroy(engineComm));
  FC_OK(fcCommDestroy(soloEngine));
  FC_OK(fcCommDestroy(solo));
  return failures ? 1 : 0;
}

// fc-bench agmm --forms / --agathered / --msweep: fcAllGatherMatmul as callers call it
// (issue 45). Per shape and transB, one interleaved run of:
//   gemm       the GEMM alone on the gathered A (one-rank communicator)
//   comm       the all-gather of the A shards alone, the fastest of CommCandidates
//              (comm_from names it)
//   nccl+gemm  ncclAllGather, then the GEMM (when NCCL loads); fc+gemm: fcAllGather, then it
//   one op per form: A plain (cudaMalloc) or symmetric (fcMemAlloc of the run's
//              communicator), Agathered NULL or a plain [M, K] buffer; the auto choice
// and one row per form: op / GEMM, op / (NCCL + GEMM) (0 without NCCL), fixed = op -
// max(gemm, comm): the op's cost beyond its larger part were the other hidden
// completely. relerr: C against the GEMM alone and Agathered against the all-gather's
// (exact inputs: 0).
int benchAgmmForms(Ctx& c, const Options& o, const std::string& shapes, const std::string& transB,
                   const std::vector<CallerForm>& forms) {
  const fcDataType_t type = parseType(o.dtype);
  const size_t W = size_t(c.nranks), es = fcTypeSize(type);
  std::string why;
  const bool haveNccl = o.nccl && (c.ncclComm != nullptr || initNccl(c, &why));
  fcComm_t solo = soloComm();
  CommCandidates comm(c, "FC_ALLGATHER_ALGO");
  printFormsHeader(c, o, "agmm", haveNccl, why);
  int failures = 0;
  for (const Shape& sh : parseShapes(shapes, size_t(c.nranks))) {
    Operands x(c, type, sh);
    void *A = x.A, *B = x.B, *G = x.G, *C = x.C, *Cref = x.Cref;
    const size_t ms = sh.M / W, shardBytes = ms * sh.K * es;
    void *As, *AG;  // A in symmetric memory; the Agathered output
    FC_OK(fcMemAlloc(c.comm, &As, shardBytes));
    CUDA_OK(cudaMemcpyAsync(As, A, shardBytes, cudaMemcpyDeviceToDevice, c.stream));
    CUDA_OK(cudaMalloc(&AG, sh.M * sh.K * es));
    comm.bind(A, shardBytes);
    const Options t = timingFor(o, 2.0 * double(sh.M) * double(sh.N) * double(sh.K));
    for (fcOperation_t op : {fcOpN, fcOpT}) {
      if ((op == fcOpN && transB == "t") || (op == fcOpT && transB == "n")) continue;
      x.reference(op, solo);
      std::vector<double> relerr;
      for (const CallerForm& f : forms)
        relerr.push_back(x.relerrOf(op, c.comm, f.symmetric ? As : A, f.agathered ? AG : nullptr));

      auto gemmOp = [&] { FC_OK(fcAllGatherMatmul(G, B, Cref, nullptr, sh.M, sh.N, sh.K, op, type, solo, c.stream)); };
      // The columns in printFormRows' order: the GEMM alone, the unfused pair, the
      // communication candidates, the forms, NCCL + the GEMM.
      std::vector<std::function<void()>> timed = {gemmOp, [&] {
                                                    FC_OK(fcAllGather(A, G, ms * sh.K, type, c.comm, c.stream));
                                                    gemmOp();
                                                  }};
      for (size_t i = 0; i < comm.comms.size(); ++i)
        timed.push_back([&, i] { FC_OK(fcAllGather(comm.send[i], G, ms * sh.K, type, comm.comms[i], c.stream)); });
      for (const CallerForm& f : forms) {
        const void* a = f.symmetric ? As : A;
        void* ag = f.agathered ? AG : nullptr;
        timed.push_back(
            [&, a, ag] { FC_OK(fcAllGatherMatmul(a, B, C, ag, sh.M, sh.N, sh.K, op, type, c.comm, c.stream)); });
      }
      if (haveNccl)
        timed.push_back([&] {
          if (c.nccl.allGather(A, G, ms * sh.K, int(type), c.ncclComm, c.stream) != 0) exit(1);
          gemmOp();
        });
      std::vector<double> us = timeGraphs(c, t, timed);
      maxOverRanks(c, us);
      failures += printFormRows(c, sh, op, type, true, forms, relerr, us, comm, haveNccl, t);
    }
    comm.unbind();
    FC_OK(fcMemFree(c.comm, As));
    CUDA_OK(cudaFree(AG));
  }
  FC_OK(fcCommDestroy(solo));
  return failures ? 1 : 0;
}

// fc-bench agmmstages: where the all-gather + GEMM engine path's time goes (issue 16).
// Per shape (B [N, K]), every column on its own communicator, timed interleaved:
//   cutlass    the engine's GEMM alone (one rank, the gathered A in place)
//   engine     the engine path (FC_AGMM_ALGO=engine), each shard pulled in one piece
//   pieces-2/4 the same with each shard pulled in 2 / 4 flagged pieces
//              (FC_AGMM_ENGINE_PIECES)
//   kpieces-4  the pushed shards in 4 flagged pieces of K columns, a peer's tile
//              waiting per piece in its mainloop (FC_AGMM_ENGINE_KPIECES; the pushed
//              form only: plain A, shards of whole tile rows, else as engine)
//   sm-push    the pushed shards stored by a kernel on a few SMs in front of the GEMM
//              instead of the copy queue (FC_AGMM_ENGINE_PUSH=sm; the pushed form only)
//   sm-kpieces-4  both
//   no-wait    the GEMM does not wait for the flags: it runs beside the pulls
//   no-pull    no remote pulls, the flags set at once (FC_AGMM_ENGINE_STAGES)
//   auto       fcAllGatherMatmul's own choice
// Read: engine - no-wait = the waits for rows; no-wait - no-pull = what the pulls cost
// the GEMM (HBM and L2 shared with the copy engine); no-pull - cutlass = the fixed
// costs (staging copy, barriers, own-rows copy, flag reset). no-wait and no-pull
// compute wrong results; the engine columns are checked against the GEMM alone
// (relerr, exact inputs: must be 0).
// A shard beyond a workspace slot runs the pipeline in passes under the forced engine
// (allgather_matmul.cc, pipelineInPasses; cuBLASLt GEMMs, the pieces columns the same
// path): there no-wait leaves out the peers' GEMMs' waits for their pulls, no-pull the
// pulls and staging copies, so that no-pull - cutlass is the barriers and the GEMM in
// pieces (fc-bench agmm's gemm column is the cuBLAS GEMM alone to read it against).
// `form` is the caller form every column but cutlass runs (--forms / --agathered, one
// form): A plain or symmetric (fcMemAlloc of each column's own communicator, so that
// every column sees symmetric memory), Agathered NULL or a plain [M, K] buffer, checked
// bit for bit against the all-gather (relerr 1 when it differs).
int benchAgmmStages(Ctx& c, const Options& o, const std::string& shapes, const CallerForm& form) {
  const fcDataType_t type = parseType(o.dtype);
  struct Variant {
    const char *name, *var, *value, *var2 = nullptr, *value2 = nullptr;
  };
  const Variant variants[] = {{"engine", "FC_AGMM_ENGINE_PIECES", "1"},
                              {"pieces-2", "FC_AGMM_ENGINE_PIECES", "2"},
                              {"pieces-4", "FC_AGMM_ENGINE_PIECES", "4"},
                              {"kpieces-4", "FC_AGMM_ENGINE_KPIECES", "4"},
                              {"sm-push", "FC_AGMM_ENGINE_PUSH", "sm"},
                              {"sm-kpieces-4", "FC_AGMM_ENGINE_PUSH", "sm", "FC_AGMM_ENGINE_KPIECES", "4"},
                              {"no-wait", "FC_AGMM_ENGINE_STAGES", "no-wait"},
                              {"no-pull", "FC_AGMM_ENGINE_STAGES", "no-pull"}};
  fcComm_t solo = soloComm(), soloEngine = soloComm("engine");
  // Every column on the engine, one piece unless it says otherwise (the stages are
  // differences against the one-piece engine column).
  std::vector<fcComm_t> comms;
  {
    ScopedEnv engine("FC_AGMM_ALGO", "engine"), onePiece("FC_AGMM_ENGINE_PIECES", "1");
    for (const Variant& v : variants) {
      ScopedEnv second(v.var2 ? v.var2 : "FC_UNUSED", v.value2);  // no-op without a second variable
      comms.push_back(commWithEnv(c, v.var, v.value));
    }
  }
  if (c.rank == 0) {
    printf("# fc-bench agmmstages: %s, %s, B [N, K], A %s, Agathered %s, the engine path with stages left out; "
           "graph of %d calls, %d replays (median), %d warm-up\n",
           describeRun(c).c_str(), fcTypeName(type), form.symmetric ? "symmetric" : "plain",
           form.agathered ? "[M, K]" : "NULL", o.iters, o.replays, o.warmup);
    std::string header = "M,N,K,cutlass_us";
    for (const Variant& v : variants) header += std::string(",") + v.name + "_us";
    printf("%s,auto_us,relerr\n", header.c_str());
  }
  int failures = 0;
  for (const Shape& sh : parseShapes(shapes, size_t(c.nranks))) {
    Operands x(c, type, sh);
    void *B = x.B, *G = x.G, *C = x.C, *Cref = x.Cref;
    const size_t shardBytes = x.shardElems * x.es;
    // Each column's A: ours, or a symmetric copy on that column's communicator (the
    // last one, auto, on the run's).
    std::vector<fcComm_t> all = comms;
    all.push_back(c.comm);
    std::vector<void*> As(all.size(), x.A);
    if (form.symmetric)
      for (size_t i = 0; i < all.size(); ++i) {
        FC_OK(fcMemAlloc(all[i], &As[i], shardBytes));
        CUDA_OK(cudaMemcpyAsync(As[i], x.A, shardBytes, cudaMemcpyDeviceToDevice, c.stream));
      }
    void* AG = nullptr;
    if (form.agathered) CUDA_OK(cudaMalloc(&AG, sh.M * sh.K * x.es));
    x.reference(fcOpT, solo);
    // The engine columns that compute (all but no-wait and no-pull, the last two),
    // against the GEMM alone.
    double relerr = 0;
    for (size_t v = 0; v + 2 < std::size(variants); ++v)
      relerr = std::max(relerr, x.relerrOf(fcOpT, comms[v], As[v], AG));
    std::vector<std::function<void()>> ops = {[&] {
      FC_OK(fcAllGatherMatmul(G, B, Cref, nullptr, sh.M, sh.N, sh.K, fcOpT, type, soloEngine, c.stream));
    }};
    for (size_t i = 0; i < all.size(); ++i)
      ops.push_back([&, i] {
        FC_OK(fcAllGatherMatmul(As[i], B, C, AG, sh.M, sh.N, sh.K, fcOpT, type, all[i], c.stream));
      });
    std::vector<double> us = timeGraphsMax(c, o, ops);
    CUDA_OK(cudaStreamSynchronize(c.stream));
    if (form.symmetric)
      for (size_t i = 0; i < all.size(); ++i) FC_OK(fcMemFree(all[i], As[i]));
    if (AG) CUDA_OK(cudaFree(AG));
    failures += relerr != 0.0;
    char err[32];
    snprintf(err, sizeof err, "%g", relerr);
    printStagesRow(c, sh.M, sh.N, sh.K, us, 1, err);
  }
  for (fcComm_t comm : comms) FC_OK(fcCommDestroy(comm));
  FC_OK(fcCommDestroy(soloEngine));
  FC_OK(fcCommDestroy(solo));
  return failures ? 1 : 0;
}
