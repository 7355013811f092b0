// fc-bench stages: where the Lamport one-shot all-reduce's time goes (issue 23). For
// each size, the kernel with every stage once (full) and with one stage left out or
// run twice (FC_LAMPORT_STAGES, device_comm.h LamportStage), each on its own
// communicator, all timed interleaved in one run (timeGraphs: graphs of -n calls,
// medians, max over ranks):
//   full         push, reset the run before's buffer, poll + sum + store, save the state:
//                the production kernel (allReduceLamportKernel<..., kMeasure = false>),
//                its CTAs one to an SM where tuning::lamportSoloCtas says
//   full-measured  the same stages in the measurement kernel (kMeasure = true), which
//                every column below runs: their baseline (its stage branches cost time
//                of their own)
//   lean         full in the production kernel's lean form (32-bit indices, whole aligned
//                packs loaded and stored without bounds checks): timed against full
//   late         full with the next kernel's launch allowed at the end of each CTA, not
//                after its pushes
//   solo         full with one CTA an SM at every size (unused dynamic shared memory):
//                the next call's CTAs, launched early, cannot sit beside ours
//   shared       full with our CTAs free to share SMs at every size (before 2026-11-27's
//                solo rule, every call)
//   timeline     full with per-CTA phase stamps (lamport_timeline.cuh): its "# timeline"
//                lines in the log say when, within a call, the CTAs issued their pushes
//                and reset, summed their first and last packs, and how far apart they
//                started and ended; its time is full's plus the stamps' cost
//   narrow       full in CTAs of 512 data threads where a CTA owns 513-992 packs (two
//                packs for some data threads; real calls give each one, in CTAs of up to
//                992, tuning::lamportWideCtas): timed against full
//   wide         full in CTAs of up to 992 data threads wherever a CTA owns more than
//                512 packs (also beyond 992, where real calls keep 512)
//   push-only    no poll, no sum, no store (the pushes, the reset, the launch)
//   push-twice   the pushes twice
//   sum-twice    poll + sum + store twice (the second time the data is there)
//   reset-twice  the reset twice
//   no-reset     no reset (from the third call on, the polls find stale data at once)
//   no-save      no state save (every call uses the same buffer: stale data at once)
//   no-call      no call-header exchange (right sums; no mismatch detection)
//   clear-read   no reset; each peer pack cleared as soon as it is read instead (right
//                sums while every call is the one-shot all-reduce, as here)
//   reset-late   the reset after the sums instead of between the pushes and the polls
//   reset-call-warp  the reset by the call warp after its header exchange, while the
//                data threads poll
//   spins-N      full, with N polls back to back before the polls back off
//                (FC_LAMPORT_SPINS=N; the default is 0)
// Only full, full-measured, lean, late, solo, shared, timeline, narrow, wide,
// no-call, clear-read, reset-late, reset-call-warp and spins-N compute the right sums;
// the others are timings. The calls are fcAllReduceOneShot (the Lamport one-shot up to
// its limit: its push slot, 4 MiB at 2 ranks, 1 MiB at 3-4; the default largest size).
// A column times fcAllReduce's own choice (auto) on the same size, interleaved: where
// it is not the one-shot, the one-shot / two-shot crossover is read off directly. The
// last, check, says whether the variants that compute the right sums did, after their
// timed replays: each called once more on integer inputs (exact sums), outputs poisoned.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "bench.h"
#include "fc_data.h"

namespace {

// A timed variant: a communicator made with var=value, its column named name.
struct Variant {
  const char *name, *var, *value;
};

// fc-bench stages' variants, and whether each computes the right sums (checked).
struct StageVariant : Variant {
  bool exact;
};

}  // namespace

int benchStages(Ctx& c, const Options& o) {
  const fcDataType_t type = parseType(o.dtype);
  const size_t es = fcTypeSize(type);
  const size_t minBytes = std::max(parseBytes(o.minBytes), es);
  const size_t maxBytes = !o.maxBytes.empty() ? parseBytes(o.maxBytes) : c.nranks <= 2 ? (4u << 20) : (1u << 20);
  const StageVariant variants[] = {{{"full", "FC_LAMPORT_STAGES", "full"}, true},
                                   {{"full-measured", "FC_LAMPORT_STAGES", "full-measured"}, true},
                                   {{"lean", "FC_LAMPORT_STAGES", "lean"}, true},
                                   {{"late", "FC_LAMPORT_STAGES", "late"}, true},
                                   {{"solo", "FC_LAMPORT_STAGES", "solo"}, true},
                                   {{"shared", "FC_LAMPORT_STAGES", "shared"}, true},
                                   {{"timeline", "FC_LAMPORT_STAGES", "timeline"}, true},
                                   {{"narrow", "FC_LAMPORT_STAGES", "narrow"}, true},
                                   {{"wide", "FC_LAMPORT_STAGES", "wide"}, true},
                                   {{"push-only", "FC_LAMPORT_STAGES", "push-only"}, false},
                                   {{"push-twice", "FC_LAMPORT_STAGES", "push-twice"}, false},
                                   {{"sum-twice", "FC_LAMPORT_STAGES", "sum-twice"}, false},
                                   {{"reset-twice", "FC_LAMPORT_STAGES", "reset-twice"}, false},
                                   {{"no-reset", "FC_LAMPORT_STAGES", "no-reset"}, false},
                                   {{"no-save", "FC_LAMPORT_STAGES", "no-save"}, false},
                                   {{"no-call", "FC_LAMPORT_STAGES", "no-call"}, true},
                                   {{"clear-read", "FC_LAMPORT_STAGES", "clear-read"}, true},
                                   {{"reset-late", "FC_LAMPORT_STAGES", "reset-late"}, true},
                                   {{"reset-call-warp", "FC_LAMPORT_STAGES", "reset-call-warp"}, true},
                                   {{"spins-8", "FC_LAMPORT_SPINS", "8"}, true},
                                   {{"spins-64", "FC_LAMPORT_SPINS", "64"}, true}};
  std::vector<fcComm_t> comms;
  for (const StageVariant& v : variants) comms.push_back(commWithEnv(c, v.var, v.value));
  void *in, *out;
  CUDA_OK(cudaMalloc(&in, maxBytes));
  CUDA_OK(cudaMalloc(&out, maxBytes));
  if (c.rank == 0) {
    printf("# fc-bench stages: %s, the Lamport one-shot (fcAllReduceOneShot) with stages left out or twice; "
           "graph of %d calls, %d replays (median), %d warm-up\n",
           describeRun(c).c_str(), o.iters, o.replays, o.warmup);
    std::string header = "size";
    for (const StageVariant& v : variants) header += std::string(",") + v.name + "_us";
    printf("%s,allreduce-auto_us,check\n", header.c_str());
  }
  int failures = 0;
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes = size_t(double(bytes) * o.factor + 0.5)) {
    const size_t count = bytes / es;
    // Integer inputs: every rank's sum is exact in every dtype.
    const uint64_t seed = fcSplitMix(count);
    const std::vector<char> mine = fcPatternInput(type, count, seed, c.rank);
    CUDA_OK(cudaMemcpy(in, mine.data(), count * es, cudaMemcpyHostToDevice));
    std::vector<std::function<void()>> ops;
    for (fcComm_t comm : comms)
      ops.push_back([=, &c] { FC_OK(fcAllReduceOneShot(in, out, count, type, fcSum, comm, c.stream)); });
    ops.push_back([=, &c] { FC_OK(fcAllReduce(in, out, count, type, fcSum, c.comm, c.stream)); });
    std::vector<double> us = timeGraphsMax(c, o, ops);
    // The exact variants once more, each from a poisoned output (0xff: NaN in every dtype).
    double worst = 0;
    std::vector<char> got(count * es);
    for (size_t v = 0; v < comms.size(); ++v) {
      if (!variants[v].exact) continue;
      CUDA_OK(cudaMemsetAsync(out, 0xff, count * es, c.stream));
      ops[v]();
      CUDA_OK(cudaMemcpyAsync(got.data(), out, count * es, cudaMemcpyDeviceToHost, c.stream));
      CUDA_OK(cudaStreamSynchronize(c.stream));
      worst = std::max(worst, fcPatternSumError(got.data(), type, count, seed, c.nranks));
    }
    const bool ok = maxOverRanks(c, worst) == 0.0;
    failures += !ok;
    if (c.rank == 0) {
      printf("%zu", count * es);
      for (double u : us) printf(",%.2f", u);
      printf(",%s\n", ok ? "OK" : "FAIL");
      fflush(stdout);
    }
  }
  CUDA_OK(cudaFree(in));
  CUDA_OK(cudaFree(out));
  for (fcComm_t comm : comms) FC_OK(fcCommDestroy(comm));
  return failures ? 1 : 0;
}

// fc-bench normstages: where fcAllReduceResidualRMSNorm's one-kernel path spends its
// time (issue 19: at decode sizes it took 3.4-5.8 us more than the all-reduce alone on 2
// H200s). Per (tokens, hidden), every variant on its own communicator
// (FC_ARNORM_STAGES, device/norm_stages.h), timed interleaved with the Lamport one-shot
// all-reduce of the same bytes:
//   full            push, per row: prefetch, poll + sum + clear + residual + store,
//                   norm (production)
//   no-prefetch     full, the residual and weight packs loaded after the polls
//   full-measured   full on the measured kernel (stages at run time), beside:
//   loop-row        full-measured with every row through the row loop and its
//                   local-memory arrays, also where a thread holds one pack of the row
//                   (as before the one-pack path: norm_rows.cuh normRow)
//   no-norm         no mean square, no normed rows (no barrier, no weight)
//   allreduce-only  no residual either: the Rows-kind all-reduce alone
//   push-only       no polls, sums or stores (the launch and the pushes)
//   no-reset        no clearing of what was read (from the fourth call on, the
//                   polls find stale data)
//   cta-per-row     full, a row in one CTA (FC_ARNORM_CLUSTER_PACKS=0)
//   no-wide-ctas    full, a CTA whose share of a row is over 512 packs with 512 data
//                   threads, some of which take two packs (FC_ARNORM_WIDE_CTAS=0)
//   cluster-N       full, a row over a thread block cluster of CTAs of N packs each
//                   (FC_ARNORM_CLUSTER_PACKS=N; the default: one CTA for rows of up
//                   to 512 packs, else 256 packs per CTA)
//   spins-N         full, N polls back to back before the polls back off
//                   (FC_LAMPORT_SPINS=N; unset, the one kernel takes
//                   tuning::normLamportSpins: 64 up to 128 rows, 0 beyond)
//   solo            full, one CTA an SM (unused dynamic shared memory): the next
//                   call's CTAs, launched early, cannot sit beside ours
//   row-ctas-N      full, where a row is one CTA's, up to N CTAs (FC_ARNORM_ROW_CTAS=N:
//                   past 128 the kernel built for two CTAs an SM, at most what the
//                   device holds at once; 128: rows in turn beyond, as full did before
//                   tuning::normRowsOwnCtas)
//   twoshot         the two-shot kernel (FC_ARNORM_ALGO=twoshot), where the row fits
//   timeline        full with per-CTA phase stamps (lamport_timeline.cuh): its "# timeline
//                   norm" lines (in the log, not the CSV) give pushes issued, first pack
//                   summed, first row done and last row done, beside the one-shot's own
//                   (fc-bench stages' timeline column) at the same bytes
//   oneshot         fcAllReduceOneShot, same bytes (the one-shot kind's all-reduce)
// full, no-prefetch, full-measured and loop-row are checked to give the same bits (the arnorm mode and the
// tests check full against a reference); cta-per-row, no-wide-ctas, cluster-N, spins-N, row-ctas-N and
// twoshot are correct calls,
// which tools/gpu-check runs the GPU suite with, and solo too (the production kernel, launched
// with unused shared memory); the others are timings only.
int benchNormStages(Ctx& c, const Options& o, const std::string& tokensList, const std::string& hiddenList) {
  const fcDataType_t type = parseType(o.dtype);
  const size_t es = fcTypeSize(type);
  const std::vector<size_t> tokensV = parseList(tokensList), hiddenV = parseList(hiddenList);
  const size_t maxElems = *std::max_element(tokensV.begin(), tokensV.end()) *
                          *std::max_element(hiddenV.begin(), hiddenV.end());
  // The first kSameBits variants compute the same bits (checked below).
  constexpr int kSameBits = 4;
  const Variant variants[] = {{"full", "FC_ARNORM_STAGES", "full"},
                              {"no-prefetch", "FC_ARNORM_STAGES", "no-prefetch"},
                              {"full-measured", "FC_ARNORM_STAGES", "full-measured"},
                              {"loop-row", "FC_ARNORM_STAGES", "loop-row"},
                              {"no-norm", "FC_ARNORM_STAGES", "no-norm"},
                              {"allreduce-only", "FC_ARNORM_STAGES", "allreduce-only"},
                              {"push-only", "FC_ARNORM_STAGES", "push-only"},
                              {"no-reset", "FC_ARNORM_STAGES", "no-reset"},
                              {"cta-per-row", "FC_ARNORM_CLUSTER_PACKS", "0"},
                              {"no-wide-ctas", "FC_ARNORM_WIDE_CTAS", "0"},
                              {"cluster-64", "FC_ARNORM_CLUSTER_PACKS", "64"},
                              {"cluster-128", "FC_ARNORM_CLUSTER_PACKS", "128"},
                              {"cluster-256", "FC_ARNORM_CLUSTER_PACKS", "256"},
                              {"spins-0", "FC_LAMPORT_SPINS", "0"},
                              {"spins-8", "FC_LAMPORT_SPINS", "8"},
                              {"spins-64", "FC_LAMPORT_SPINS", "64"},
                              {"solo", "FC_ARNORM_STAGES", "solo"},
                              {"row-ctas-128", "FC_ARNORM_ROW_CTAS", "128"},
                              {"row-ctas-512", "FC_ARNORM_ROW_CTAS", "512"},
                              {"twoshot", "FC_ARNORM_ALGO", "twoshot"},
                              {"timeline", "FC_ARNORM_STAGES", "timeline"}};
  std::vector<fcComm_t> comms;
  for (const Variant& v : variants) comms.push_back(commWithEnv(c, v.var, v.value));
  void *in, *res, *w, *resOut, *out, *arOut;
  for (void** p : {&in, &res, &resOut, &out, &arOut}) CUDA_OK(cudaMalloc(p, maxElems * es));
  CUDA_OK(cudaMalloc(&w, *std::max_element(hiddenV.begin(), hiddenV.end()) * es));
  if (c.rank == 0) {
    printf("# fc-bench normstages: %s, %s, the all-reduce + RMSNorm kernel with stages left out; graph of %d calls, "
           "%d replays (median, interleaved), %d warm-up\n",
           describeRun(c).c_str(), o.dtype.c_str(), o.iters, o.replays, o.warmup);
    std::string header = "tokens,hidden,bytes";
    for (const Variant& v : variants) header += std::string(",") + v.name + "_us";
    printf("%s,oneshot_us,same_bits\n", header.c_str());
  }
  int failures = 0;
  for (size_t hidden : hiddenV) {
    for (size_t tokens : tokensV) {
      const size_t n = tokens * hidden, bytes = n * es;
      uploadNormInputs(c, type, tokens, hidden, in, res, w);
      auto call = [&](fcComm_t comm) {
        return [&, comm] {
          FC_OK(fcAllReduceResidualRMSNorm(in, res, w, resOut, out, tokens, hidden, 1e-6f, type, comm, c.stream));
        };
      };
      // full, no-prefetch, full-measured and loop-row, each from poisoned outputs: the same bits.
      std::vector<char> got[kSameBits][2];
      for (int v = 0; v < kSameBits; ++v) {
        CUDA_OK(cudaMemsetAsync(out, 0xff, bytes, c.stream));
        CUDA_OK(cudaMemsetAsync(resOut, 0xff, bytes, c.stream));
        call(comms[size_t(v)])();
        for (int b = 0; b < 2; ++b) {
          got[v][b].resize(bytes);
          CUDA_OK(cudaMemcpyAsync(got[v][b].data(), b ? out : resOut, bytes, cudaMemcpyDeviceToHost, c.stream));
        }
        CUDA_OK(cudaStreamSynchronize(c.stream));
      }
      bool sameHere = true;
      for (int v = 1; v < kSameBits; ++v) sameHere = sameHere && got[0][0] == got[v][0] && got[0][1] == got[v][1];
      const bool same = maxOverRanks(c, sameHere ? 0.0 : 1.0) == 0.0;
      failures += !same;
      std::vector<std::function<void()>> ops;
      for (fcComm_t comm : comms) ops.push_back(call(comm));
      ops.push_back([&] { FC_OK(fcAllReduceOneShot(in, arOut, n, type, fcSum, c.comm, c.stream)); });
      std::vector<double> us = timeGraphsMax(c, o, ops);
      printStagesRow(c, tokens, hidden, bytes, us, 2, same ? "yes" : "NO");
    }
  }
  for (void* p : {in, res, w, resOut, out, arOut}) CUDA_OK(cudaFree(p));
  for (fcComm_t comm : comms) FC_OK(fcCommDestroy(comm));
  return failures ? 1 : 0;
}
