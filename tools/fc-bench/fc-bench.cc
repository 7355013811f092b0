// fc-bench: the libfusedcomm benchmark, nccl-tests conventions. One process per
// rank under tools/fcrun:
//
//   tools/fcrun -n 4 -- build/tools/fc-bench/fc-bench allreduce -b 8 -e 256M -f 2 -d bf16
//
// Modes: allreduce, reducescatter, allgather (below); agmm, mmrs, mmar (the fused GEMMs:
// agmm.cc, mmrs.cc, mmar.cc; agmm and mmrs with --forms / --agathered / --msweep print
// the caller-form table of issue 45 instead; agmmstages / mmrsstages, the engine paths'
// stages: agmm.cc / mmrs.cc; mmarstages, fcMatmulAllReduce's engine path's parts:
// mmar.cc); arnorm (all-reduce + residual + RMSNorm: arnorm.cc).
//
// For every size: check our result (exact integer inputs, poisoned output), then
// time a CUDA graph of -n back-to-back calls, replayed -r times after -w warm-up
// replays; time per call = median replay / n, max over ranks. Then eager calls
// (--eager 1, the default): -n times one call + cudaStreamSynchronize (median wall
// time), -n calls back to back + one synchronize (wall time per call), and the host
// time spent issuing each of those. NCCL (dlopened, when available) is timed the
// same ways in the same run; the all-reduce also without programmatic dependent
// launch (nopdl_us: FC_PDL=0, timed interleaved with the default). algbw = size / time, where size
// is the all-reduce buffer, the reduce-scatter input or the all-gather output;
// busbw = algbw * 2(n-1)/n (all-reduce) or (n-1)/n (reduce-scatter, all-gather).
// Rank 0 prints the table (or --csv / --json); exit status non-zero if a check fails.
// FC_BENCH_DOT=DIR writes every timed graph as it was captured (rank 0): DIR/graph-N.dot
// (cudaGraphDebugDotPrint) and graph-N.dot.edges (each edge's type and port, which the
// dot print leaves out).
//
// allreduce --grid short|full (or --tokens / --hidden lists): instead of -b/-e/-f, the
// decode grid of tools/common/decode_grid.h, hidden-major: size = tokens x hidden
// elements (bf16 by default), the rows with two more columns, tokens and hidden.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "decode_grid.h"
#include "fc_data.h"
#include "fc_env.h"
#include "fusedcomm.h"
#include "bench.h"
#include "nccl.h"

namespace {

const char* modeName(Mode m) {
  return m == Mode::AllReduce ? "allreduce" : m == Mode::ReduceScatter ? "reducescatter" : "allgather";
}

// One size of the sweep: its bytes (before rounding to whole elements per rank), and
// for the decode grid the shape it stands for (0 x 0 otherwise).
struct SweepSize {
  size_t bytes, tokens, hidden;
};

// grid: the decode grid's (tokens, hidden) cells, hidden-major (all-reduce only);
// empty: the -b/-e/-f sweep.
int bench(Ctx& c, const Options& o, Mode mode, const std::vector<SweepSize>& grid) {
  const fcDataType_t type = parseType(o.dtype);
  const size_t es = fcTypeSize(type), W = size_t(c.nranks);
  const bool onGrid = !grid.empty();
  std::vector<SweepSize> sizes = grid;
  for (SweepSize& g : sizes) g.bytes = g.tokens * g.hidden * es;
  size_t maxBytes = o.maxBytes.empty() ? (mode == Mode::AllReduce ? (64u << 20) : (256u << 20))
                                       : parseBytes(o.maxBytes);
  const size_t minBytes = std::max(parseBytes(o.minBytes), es * (mode == Mode::AllReduce ? 1 : W));
  if (onGrid) {
    maxBytes = 0;
    for (const SweepSize& g : sizes) maxBytes = std::max(maxBytes, g.bytes);
  } else {
    for (double b = double(minBytes); b <= double(maxBytes); b *= o.factor) sizes.push_back({size_t(b), 0, 0});
  }
  const double busFactor = mode == Mode::AllReduce ? 2.0 * double(W - 1) / double(W) : double(W - 1) / double(W);
  // Per-rank input and output sizes (bytes) of a call of `size` bytes.
  const size_t inMax = mode == Mode::AllGather ? maxBytes / W : maxBytes;
  const size_t outMax = mode == Mode::ReduceScatter ? maxBytes / W : maxBytes;
  void *in, *out;
  if (o.symmetric) FC_OK(fcMemAlloc(c.comm, &in, inMax));
  else CUDA_OK(cudaMalloc(&in, inMax));
  CUDA_OK(cudaMalloc(&out, outMax));

  std::string why;
  const bool haveNccl = o.nccl && (c.ncclComm != nullptr || initNccl(c, &why));
  // The all-reduce again without programmatic dependent launch (its Lamport kernels
  // use it by default), timed interleaved with the default.
  fcComm_t noPdl = mode == Mode::AllReduce ? commWithEnv(c, "FC_PDL", "0") : nullptr;
  int failures = 0;
  if (c.rank == 0) {
    printf("# fc-bench %s: %s, graph of %d calls, %d replays (median), %d warm-up%s; NCCL: %s\n", modeName(mode),
           describeRun(c).c_str(), o.iters, o.replays, o.warmup,
           o.symmetric ? ", sendbuff from fcMemAlloc (zero-copy)" : "", describeNccl(c, haveNccl, why).c_str());
    if (o.csv)
      printf("op,size,count,type,algo,time_us,algbw,busbw,nccl_time_us,nccl_busbw,speedup,maxerr,check,"
             "eager_us,b2b_us,host_us,nccl_eager_us,nccl_b2b_us,nopdl_us%s\n", onGrid ? ",tokens,hidden" : "");
    else if (!o.json)
      printf("# %12s %12s %9s %8s %10s %9s %9s %10s %9s %7s %7s %6s %9s %9s %8s %10s %10s%s\n", "size(B)", "count",
             "type", "algo", "time(us)", "algbw", "busbw", "nccl(us)", "nccl_bus", "speedup", "maxerr", "check",
             "eager", "b2b", "host", "nccl_eag", "nccl_b2b", onGrid ? "   tokens   hidden" : "");
  }
  for (const SweepSize& sz : sizes) {
    // count: elements per rank of the op's "count" argument (nccl-tests' convention).
    const size_t total = sz.bytes / es / (mode == Mode::AllReduce ? 1 : W) * (mode == Mode::AllReduce ? 1 : W);
    const size_t count = mode == Mode::AllReduce ? total : total / W;
    const size_t bytes = total * es;
    const size_t inElems = mode == Mode::ReduceScatter ? W * count : count;
    const size_t outElems = mode == Mode::AllGather ? W * count : count;
    auto ours = [&] {
      if (mode == Mode::AllReduce) FC_OK(fcAllReduce(in, out, count, type, fcSum, c.comm, c.stream));
      else if (mode == Mode::ReduceScatter) FC_OK(fcReduceScatter(in, out, count, type, fcSum, c.comm, c.stream));
      else FC_OK(fcAllGather(in, out, count, type, c.comm, c.stream));
    };
    double err = 0;
    if (o.check) {
      const uint64_t seed = fcSplitMix(bytes * 31 + uint64_t(type) + uint64_t(mode) * 7);
      std::vector<char> h = fcPatternInput(type, inElems, seed, c.rank);
      CUDA_OK(cudaMemcpyAsync(in, h.data(), h.size(), cudaMemcpyHostToDevice, c.stream));
      CUDA_OK(cudaMemsetAsync(out, 0xff, outElems * es, c.stream));
      ours();
      std::vector<char> got(outElems * es);
      CUDA_OK(cudaMemcpyAsync(got.data(), out, got.size(), cudaMemcpyDeviceToHost, c.stream));
      CUDA_OK(cudaStreamSynchronize(c.stream));
      for (size_t i = 0; i < outElems; ++i) {
        int want = 0;
        if (mode == Mode::AllGather) want = fcPatternValue(seed, int(i / count), i % count);
        else
          for (int r = 0; r < c.nranks; ++r)
            want += fcPatternValue(seed, r, mode == Mode::ReduceScatter ? size_t(c.rank) * count + i : i);
        const double e = std::fabs(double(fcLoad(got.data(), type, i)) - want);
        if (!(e <= err)) err = std::isnan(e) ? 1e30 : e;
      }
    }
    double us, noPdlUs = 0;
    if (noPdl) {
      const std::vector<double> t = timeGraphs(
          c, o, {ours, [&] { FC_OK(fcAllReduce(in, out, count, type, fcSum, noPdl, c.stream)); }});
      us = maxOverRanks(c, t[0]);
      noPdlUs = maxOverRanks(c, t[1]);
    } else {
      us = maxOverRanks(c, timeGraph(c, o, ours));
    }
    const EagerTimes eager = o.eager ? timeEager(c, o, ours) : EagerTimes{};
    double ncclUs = 0;
    EagerTimes ncclEager;
    if (haveNccl) {
      auto theirs = [&] {
        int r = mode == Mode::AllReduce ? c.nccl.allReduce(in, out, count, int(type), 0, c.ncclComm, c.stream)
                : mode == Mode::ReduceScatter
                    ? c.nccl.reduceScatter(in, out, count, int(type), 0, c.ncclComm, c.stream)
                    : c.nccl.allGather(in, out, count, int(type), c.ncclComm, c.stream);
        if (r != 0) {
          fprintf(stderr, "fc-bench: NCCL call failed: %s\n", c.nccl.getErrorString(r));
          exit(1);
        }
      };
      ncclUs = maxOverRanks(c, timeGraph(c, o, theirs));
      if (o.eager) ncclEager = timeEager(c, o, theirs);
    }
    const double worstErr = maxOverRanks(c, err);
    const bool ok = !o.check || worstErr == 0.0;
    failures += !ok;
    if (c.rank != 0) continue;
    const double algbw = double(bytes) / (us * 1e3), busbw = algbw * busFactor;
    const double ncclBus = haveNccl ? double(bytes) / (ncclUs * 1e3) * busFactor : 0;
    const double speedup = haveNccl ? ncclUs / us : 0;
    const char* algo = o.algo.c_str();
    const char* status = o.check ? (ok ? "OK" : "FAIL") : "-";
    // The grid's shape columns, where the sweep is the grid.
    char shape[64] = "";
    if (onGrid)
      snprintf(shape, sizeof shape, o.csv ? ",%zu,%zu" : o.json ? ",\"tokens\":%zu,\"hidden\":%zu" : " %8zu %8zu",
               sz.tokens, sz.hidden);
    if (o.csv)
      printf("%s,%zu,%zu,%s,%s,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,%g,%s,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f%s\n", modeName(mode),
             bytes, count, fcTypeName(type), algo, us, algbw, busbw, ncclUs, ncclBus, speedup, worstErr, status,
             eager.syncUs, eager.b2bUs, eager.hostUs, ncclEager.syncUs, ncclEager.b2bUs, noPdlUs, shape);
    else if (o.json)
      printf("{\"op\":\"%s\",\"size\":%zu,\"count\":%zu,\"type\":\"%s\",\"algo\":\"%s\",\"time_us\":%.2f,"
             "\"algbw\":%.2f,\"busbw\":%.2f,\"nccl_time_us\":%.2f,\"nccl_busbw\":%.2f,\"speedup\":%.3f,"
             "\"maxerr\":%g,\"check\":\"%s\",\"eager_us\":%.2f,\"b2b_us\":%.2f,\"host_us\":%.2f,"
             "\"nccl_eager_us\":%.2f,\"nccl_b2b_us\":%.2f,\"nopdl_us\":%.2f%s}\n",
             modeName(mode), bytes, count, fcTypeName(type), algo, us, algbw, busbw, ncclUs, ncclBus,
             speedup, worstErr, status, eager.syncUs, eager.b2bUs, eager.hostUs, ncclEager.syncUs, ncclEager.b2bUs,
             noPdlUs, shape);
    else
      printf("  %12zu %12zu %9s %8s %10.2f %9.2f %9.2f %10.2f %9.2f %7.2f %7.2g %6s %9.2f %9.2f %8.2f %10.2f %10.2f%s\n",
             bytes, count, fcTypeName(type), algo, us, algbw, busbw, ncclUs, ncclBus, speedup, worstErr, status,
             eager.syncUs, eager.b2bUs, eager.hostUs, ncclEager.syncUs, ncclEager.b2bUs, shape);
    fflush(stdout);
  }
  if (o.symmetric) FC_OK(fcMemFree(c.comm, in));
  else CUDA_OK(cudaFree(in));
  CUDA_OK(cudaFree(out));
  if (noPdl) FC_OK(fcCommDestroy(noPdl));
  if (c.rank == 0 && !o.csv && !o.json)
    printf("# %s\n", failures ? "FAILED: results differ from the reference" : "all results verified");
  return failures ? 1 : 0;
}

}  // namespace

namespace {

// fc-bench's modes, one row each (as nccl-tests keeps one struct per collective): the
// subcommand, its help, its kind (which options it takes), the FC_*_ALGO variable that
// -A sets and every value the library accepts there. A new mode: a row here, its
// options below if it has its own, and its case in run().
enum class Kind { Collective, Gemm, Decode };
struct ModeSpec {
  const char* name;
  const char* help;
  Kind kind;
  const char* algoEnv;             // what -A sets (NULL: no -A)
  std::vector<std::string> algos;  // every value the library takes in algoEnv
};
const std::vector<std::string> kGemmOpAlgos = {"pipeline", "fused", "engine", "unfused", "auto"};
const ModeSpec kModes[] = {
    {"allreduce", "fcAllReduce", Kind::Collective, "FC_ALLREDUCE_ALGO",
     {"oneshot", "twoshot", "twoshot-lamport", "ce", "auto"}},
    {"reducescatter", "fcReduceScatter; size = the whole input", Kind::Collective, "FC_REDUCE_SCATTER_ALGO",
     {"lamport", "sm", "ce", "auto"}},
    {"allgather", "fcAllGather; size = the whole output", Kind::Collective, "FC_ALLGATHER_ALGO", {"sm", "ce", "auto"}},
    {"agmm", "fcAllGatherMatmul vs the GEMM alone and all-gather + GEMM", Kind::Gemm, "FC_AGMM_ALGO", kGemmOpAlgos},
    {"mmrs", "fcMatmulReduceScatter vs the GEMM alone and GEMM + reduce-scatter", Kind::Gemm, "FC_MMRS_ALGO",
     kGemmOpAlgos},
    {"mmar", "fcMatmulAllReduce (+ residual + RMSNorm) vs the GEMM alone and GEMM + all-reduce (+ norm)",
     Kind::Decode, "FC_MMAR_ALGO", {"fused", "engine", "unfused", "auto"}},
    {"arnorm", "fcAllReduceResidualRMSNorm vs fcAllReduce alone and all-reduce + RMSNorm", Kind::Decode,
     "FC_ARNORM_ALGO", {"fused", "unfused", "auto"}},
    {"stages", "the Lamport one-shot all-reduce with stages left out or twice (timings only; wrong sums; probe build)",
     Kind::Collective, nullptr, {}},
    {"normstages",
     "the all-reduce + RMSNorm Lamport kernel with stages left out (timings only; wrong results; probe build)",
     Kind::Decode, nullptr, {}},
    {"agmmstages",
     "the all-gather + GEMM engine path with stages left out, in pieces (timings; wrong results; probe build)",
     Kind::Gemm, nullptr, {}},
    {"mmrsstages", "the GEMM + reduce-scatter engine path with stages left out (timings; wrong results; probe build)",
     Kind::Gemm, nullptr, {}},
    {"mmarstages", "fcMatmulAllReduce's engine path with parts left out (2 ranks; timings; wrong results; probe build)",
     Kind::Gemm, nullptr, {}},
};

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : " | ") + s;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fc-bench: libfusedcomm benchmarks (run one process per GPU under tools/fcrun)"};
  app.require_subcommand(1);
  Options o;
  std::vector<CLI::App*> subs;
  std::vector<CLI::Option*> algoOpts;
  for (const ModeSpec& m : kModes) {
    CLI::App* sub = app.add_subcommand(m.name, m.help);
    subs.push_back(sub);
    if (m.kind == Kind::Collective) {
      sub->add_option("-b,--minbytes", o.minBytes, "smallest size in bytes (K/M/G suffixes)");
      sub->add_option("-e,--maxbytes", o.maxBytes,
                      "largest size (default 64M all-reduce, stages 4M at 2 ranks and 1M beyond, 256M others)");
      sub->add_option("-f,--stepfactor", o.factor, "size multiplier")->check(CLI::Range(1.01, 1e6));
      sub->add_option("-d,--datatype", o.dtype, "bf16 | fp16 | fp32");
    } else {
      sub->add_option("-d,--datatype", o.dtype, "bf16 | fp16 (arnorm: also fp32)");
      sub->add_option("--nccl", o.nccl, "time the unfused path with NCCL when libnccl.so.2 loads (1/0)");
      sub->add_option("--eager", o.eager, "also time eager calls: call + sync, back to back, host time (1/0)");
    }
    sub->add_option("-n,--iters", o.iters, "calls per captured graph")->check(CLI::PositiveNumber);
    sub->add_option("-w,--warmup_iters", o.warmup, "warm-up graph replays");
    sub->add_option("-r,--replays", o.replays, "timed graph replays (median)")->check(CLI::PositiveNumber);
    sub->add_option("--replays-start", o.replaysStart,
                    "sync (each replay after the host synchronised on the last) | barrier (an untimed fcBarrier "
                    "first: every rank's replay starts together) | queued (back to back, one sync at the end)")
        ->check(CLI::IsMember({"sync", "barrier", "queued"}));
    algoOpts.push_back(m.algoEnv == nullptr
                           ? nullptr
                           : sub->add_option("-A,--algo", o.algo, joined(m.algos) + " (sets " + m.algoEnv + ")")
                                 ->check(CLI::IsMember(m.algos)));
    if (m.kind == Kind::Collective && m.algoEnv != nullptr) {
      sub->add_option("-c,--check", o.check, "verify results (1/0)");
      sub->add_flag("-s,--symmetric", o.symmetric, "sendbuff from fcMemAlloc (zero-copy)");
      sub->add_option("--nccl", o.nccl, "time NCCL side by side when libnccl.so.2 loads (1/0)");
      sub->add_option("--eager", o.eager, "also time eager calls: call + sync, back to back, host time (1/0)");
      sub->add_flag("--csv", o.csv, "CSV rows instead of the table");
      sub->add_flag("--json", o.json, "JSON lines instead of the table");
    }
  }
  auto sub = [&](const char* name) {
    for (size_t i = 0; i < subs.size(); ++i)
      if (!strcmp(kModes[i].name, name)) return subs[i];
    return static_cast<CLI::App*>(nullptr);
  };
  // The modes' own options.
  std::string shapes = "4096,6656,16384;8192,8192,8192;4096,7168,8192;512,8192,8192;128,6656,4096";
  std::string mmrsShapes = "8192,8192,8192;4096,8192,14336;8192,8192,28672;16384,8192,8192;512,8192,8192";
  std::string transB = "both";
  std::string tokens = "1,2,4,8,16,32,64,128,256,512,1024,2048,4096", hiddens = "4096,8192";
  std::string stageTokens = "1,2,4,8,16,32,64";
  std::string stageShapes = "2048,3072,4096;2048,3584,5120;2048,14336,4096;2048,27648,5120;8192,3072,4096";
  std::string mmrsStageShapes = "2048,4096,7168;2048,4096,2048;2048,5120,13824;2048,5120,2560;8192,4096,2048";
  std::string mmarStageShapes =
      "2048,4096,2048;4096,4096,2048;8192,4096,2048;2048,5120,2560;4096,5120,2560;8192,5120,2560;8192,4096,7168";
  sub("agmm")->add_option("--shapes", shapes, "M,N,K;M,N,K;... (M global)");
  sub("mmrs")->add_option("--shapes", mmrsShapes, "M,N,K;M,N,K;... (A is [M, K] on every rank)");
  sub("agmmstages")->add_option("--shapes", stageShapes, "M,N,K;M,N,K;... (M global)");
  std::string stageForm = "plain", stageAgathered = "0";
  sub("agmmstages")
      ->add_option("--form", stageForm, "the caller form of A every column runs: plain (default) or symmetric")
      ->check(CLI::IsMember({"plain", "symmetric"}));
  sub("agmmstages")
      ->add_option("--agathered", stageAgathered, "0 (Agathered NULL, default) or 1 (a [M, K] output) in every column")
      ->check(CLI::IsMember({"0", "1"}));
  sub("mmrsstages")->add_option("--shapes", mmrsStageShapes, "M,N,K;M,N,K;... (A is [M, K] on every rank)");
  sub("mmarstages")->add_option("--shapes", mmarStageShapes, "M,N,K;M,N,K;... (A is [M, K] on every rank)");
  for (const char* m : {"agmm", "mmrs"})
    sub(m)->add_option("--transB", transB, "n | t | both")->check(CLI::IsMember({"n", "t", "both"}));
  // The caller forms (issue 45): any of these prints the caller-form table instead of the
  // default one (benchAgmmForms, benchMmrsForms).
  std::string forms, agathered;
  bool msweep = false;
  std::vector<CLI::Option*> formOpts;
  for (const char* m : {"agmm", "mmrs"}) {
    formOpts.push_back(sub(m)->add_option("--forms", forms,
                                          "caller forms of A, comma-separated: plain (cudaMalloc), symmetric "
                                          "(fcMemAlloc); prints the caller-form table (default: both)"));
    CLI::Option* sweep = sub(m)->add_flag("--msweep", msweep,
                                          "the caller-form table at M 512-32768 for two Llama-3-8B layers at TP W "
                                          "(agmm: QKV, gate_up; mmrs: o_proj, down_proj) instead of --shapes");
    sweep->excludes(sub(m)->get_option("--shapes"));
    formOpts.push_back(sweep);
  }
  formOpts.push_back(sub("agmm")->add_option("--agathered", agathered,
                                             "0 (Agathered NULL), 1 (a [M, K] output) or 0,1 (default), crossed "
                                             "with --forms; prints the caller-form table"));
  sub("arnorm")->add_option("--tokens", tokens, "token counts (rows), comma-separated");
  sub("arnorm")->add_option("--hidden", hiddens, "hidden sizes, comma-separated");
  // The decode grid (tools/common/decode_grid.h): the all-reduce swept over tokens x
  // hidden instead of -b/-e/-f; arnorm's --tokens / --hidden taken from it. An explicit
  // --tokens or --hidden replaces that list of the grid.
  std::string grid, arTokens, arHidden;
  std::vector<std::string> gridNames;
  for (const FcDecodeGrid& g : kFcDecodeGrids) gridNames.push_back(g.name);
  const std::string gridHelp = "the decode grid, hidden x tokens (tools/common/decode_grid.h): " + joined(gridNames);
  CLI::App* arSub = sub("allreduce");
  CLI::Option* arGrid = arSub->add_option("--grid", grid, gridHelp + "; size = tokens x hidden elements")
                            ->check(CLI::IsMember(gridNames));
  CLI::Option* arTokensOpt =
      arSub->add_option("--tokens", arTokens, "the grid's token counts, comma-separated (default: --grid's)");
  CLI::Option* arHiddenOpt =
      arSub->add_option("--hidden", arHidden, "the grid's hidden sizes, comma-separated (default: --grid's)");
  for (CLI::Option* g : {arGrid, arTokensOpt, arHiddenOpt})
    for (const char* sweep : {"--minbytes", "--maxbytes", "--stepfactor"}) g->excludes(arSub->get_option(sweep));
  sub("arnorm")->add_option("--grid", grid, gridHelp)->check(CLI::IsMember(gridNames));
  sub("normstages")->add_option("--tokens", stageTokens, "token counts (rows), comma-separated");
  sub("normstages")->add_option("--hidden", hiddens, "hidden sizes, comma-separated");
  std::string mmarShapes, mmarTokens = "1,4,16,64,128,256,512,2048,8192", mmarTransB = "t", mmarNorm = "both";
  sub("mmar")->add_option("--shapes", mmarShapes,
                          "M,N,K;M,N,K;... (A is [M, K] on every rank; default: --tokens x the o_proj and "
                          "down_proj layers of Llama-3-8B and Qwen2.5-32B at TP 2: N,K 4096,2048 4096,7168 "
                          "5120,2560 5120,13824)");
  sub("mmar")->add_option("--tokens", mmarTokens, "M of the default shapes, comma-separated");
  sub("mmar")->add_option("--transB", mmarTransB, "n | t | both (t: B an nn.Linear weight [N, K])")
      ->check(CLI::IsMember({"n", "t", "both"}));
  sub("mmar")->add_option("--norm", mmarNorm, "0 (fcMatmulAllReduce) | 1 (+ residual + RMSNorm) | both")
      ->check(CLI::IsMember({"0", "1", "both"}));
  bool mmarSymmetricC = false;
  sub("mmar")->add_flag("--symmetric-c", mmarSymmetricC,
                        "also time fcMatmulAllReduce with C from fcMemAlloc (column fused_symc_us; at 2 ranks the "
                        "engine's gather then stores into the peer's C: no copy)");
  bool mmarColdWeight = false;
  sub("mmar")->add_flag("--cold-weight", mmarColdWeight,
                        "every call reads its own copy of B, from a ring of copies spanning twice the L2: the "
                        "weight comes from HBM, as in a model's decode step (default: one B, which stays in L2 "
                        "across a graph's calls wherever it fits)");
  CLI11_PARSE(app, argc, argv);
  // The grid's lists where --tokens / --hidden did not name others.
  std::vector<SweepSize> arGridSizes;
  if (!grid.empty() || !arTokens.empty() || !arHidden.empty()) {
    const FcDecodeGrid& g = *fcDecodeGrid(grid.empty() ? "short" : grid.c_str());
    if (sub("allreduce")->parsed()) {
      for (size_t h : parseList(arHidden.empty() ? g.hidden : arHidden))
        for (size_t t : parseList(arTokens.empty() ? g.tokens : arTokens)) arGridSizes.push_back({0, t, h});
    } else if (sub("arnorm")->parsed()) {
      if (sub("arnorm")->get_option("--tokens")->count() == 0) tokens = g.tokens;
      if (sub("arnorm")->get_option("--hidden")->count() == 0) hiddens = g.hidden;
    }
  }
  size_t mi = 0;
  while (!subs[mi]->parsed()) ++mi;
  const ModeSpec& spec = kModes[mi];
  const std::string name = spec.name;
  // -A sets the library's env knob; without it the knob (or "auto") is what runs.
  if (spec.algoEnv != nullptr) {
    if (algoOpts[mi]->count() > 0) setenv(spec.algoEnv, o.algo.c_str(), 1);
    else if (const char* v = getenv(spec.algoEnv); v != nullptr && *v != '\0') o.algo = v;
  }
  o.timingGiven = subs[mi]->get_option("--iters")->count() > 0 || subs[mi]->get_option("--replays")->count() > 0;
  bool formsTable = false;
  for (CLI::Option* opt : formOpts) formsTable = formsTable || opt->count() > 0;
  if (spec.kind == Kind::Gemm && o.iters == Options{}.iters) {
    o.iters = 5;  // GEMM-sized calls: fewer per graph, fewer replays
    o.replays = 10;
    o.warmup = 2;
  }  // (decode-sized calls keep the collectives' defaults: 20 calls per graph, 20 replays)

  fcUniqueId id;
  if (!fcUniqueIdFromEnv(&id)) {
    fprintf(stderr, "fc-bench: FC_UNIQUE_ID is not set: run under tools/fcrun -n N\n");
    return 2;
  }
  Ctx c{};
  c.rank = fcEnvInt("FC_RANK", 0);
  c.nranks = fcEnvInt("FC_WORLD_SIZE", 1);
  int ndev = 1;
  CUDA_OK(cudaGetDeviceCount(&ndev));
  // FC_SHARE_GPU=1 (functional runs on one GPU) puts several ranks on a device.
  CUDA_OK(cudaSetDevice(fcEnvInt("FC_LOCAL_RANK", c.rank) % ndev));
  FC_OK(fcCommInitRank(&c.comm, c.nranks, id, c.rank));
  CUDA_OK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  if (msweep) (name == "agmm" ? shapes : mmrsShapes) = msweepShapes(name, c.nranks);
  const int rc = formsTable && name == "agmm" ? benchAgmmForms(c, o, shapes, transB, parseForms(forms, agathered))
                 : formsTable && name == "mmrs" ? benchMmrsForms(c, o, mmrsShapes, transB, parseForms(forms, "0"))
                 : name == "stages"       ? benchStages(c, o)
                 : name == "normstages" ? benchNormStages(c, o, stageTokens, hiddens)
                 : name == "arnorm"     ? benchArnorm(c, o, tokens, hiddens)
                 : name == "agmm"       ? benchAgmm(c, o, shapes, transB)
                 : name == "agmmstages" ? benchAgmmStages(c, o, stageShapes, parseForms(stageForm, stageAgathered)[0])
                 : name == "mmrsstages" ? benchMmrsStages(c, o, mmrsStageShapes)
                 : name == "mmarstages" ? benchMmarStages(c, o, mmarStageShapes)
                 : name == "mmrs"       ? benchMmrs(c, o, mmrsShapes, transB)
                 : name == "mmar"
                     ? benchMmar(c, o, mmarShapes, mmarTokens, mmarTransB, mmarNorm, mmarSymmetricC, mmarColdWeight)
                 : name == "allreduce"  ? bench(c, o, Mode::AllReduce, arGridSizes)
                 : name == "reducescatter" ? bench(c, o, Mode::ReduceScatter, {})
                                           : bench(c, o, Mode::AllGather, {});
  if (c.ncclComm) c.nccl.commDestroy(c.ncclComm);
  CUDA_OK(cudaStreamDestroy(c.stream));
  FC_OK(fcCommDestroy(c.comm));
  return rc;
}
