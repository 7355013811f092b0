// fc-bench: the libfusedcomm benchmark, nccl-tests conventions. One process per
// rank under tools/fcrun:
//
//   tools/fcrun -n 4 -- build/tools/fc-bench/fc-bench allreduce -b 8 -e 64M -f 2 -d bf16
//
// For every size: check the result (exact integer inputs, poisoned output) and
// time a CUDA graph of -n back-to-back calls, replayed -r times after -w warm-up
// replays; time per call = median replay / n, max over ranks. algbw = bytes / time;
// busbw = algbw * 2(n-1)/n for all-reduce (the bytes each rank must move over its
// links, comparable across world sizes). Rank 0 prints the table; the exit status
// is non-zero if any check failed.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "fc_data.h"
#include "fc_env.h"
#include "fusedcomm.h"

namespace {

#define CUDA_OK(call)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      fprintf(stderr, "fc-bench: %s failed: %s\n", #call, cudaGetErrorString(e_));     \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

#define FC_OK(call)                                                                     \
  do {                                                                                  \
    fcResult_t r_ = (call);                                                             \
    if (r_ != fcSuccess) {                                                              \
      fprintf(stderr, "fc-bench: %s failed: %s: %s\n", #call, fcGetErrorString(r_),     \
              fcGetLastError(nullptr));                                                 \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

struct Options {
  std::string minBytes = "8", maxBytes = "", dtype = "bf16";
  double factor = 2;
  int iters = 20, warmup = 5, replays = 20;
  bool check = true;
  bool symmetric = false;  // sendbuff from fcMemAlloc: zero-copy, no workspace limit
};

size_t parseBytes(const std::string& s) {
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  double scale = 1;
  if (*end == 'K' || *end == 'k') scale = 1024;
  else if (*end == 'M' || *end == 'm') scale = 1024.0 * 1024;
  else if (*end == 'G' || *end == 'g') scale = 1024.0 * 1024 * 1024;
  return size_t(v * scale);
}

fcDataType_t parseType(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return fcBfloat16;
  if (s == "fp16" || s == "half" || s == "float16") return fcFloat16;
  if (s == "fp32" || s == "float" || s == "float32") return fcFloat32;
  fprintf(stderr, "fc-bench: unknown dtype %s (bf16, fp16, fp32)\n", s.c_str());
  exit(2);
}

struct Ctx {
  fcComm_t comm;
  int rank, nranks;
  cudaStream_t stream;
};

// The max over ranks of a per-rank value, through our own all-reduce (each rank
// fills its slot of a zeroed vector; the sum then holds every rank's value).
double maxOverRanks(const Ctx& c, double v) {
  std::vector<float> h(size_t(c.nranks), 0.f);
  h[size_t(c.rank)] = float(v);
  float* d;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&d), h.size() * sizeof(float)));
  CUDA_OK(cudaMemcpyAsync(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice, c.stream));
  FC_OK(fcAllReduceOneShot(d, d, h.size(), fcFloat32, fcSum, c.comm, c.stream));
  CUDA_OK(cudaMemcpyAsync(h.data(), d, h.size() * sizeof(float), cudaMemcpyDeviceToHost, c.stream));
  CUDA_OK(cudaStreamSynchronize(c.stream));
  CUDA_OK(cudaFree(d));
  return *std::max_element(h.begin(), h.end());
}

// Median time of one call (us), timing graph replays of `iters` calls of `op`.
template <typename Op>
double timeGraph(const Ctx& c, const Options& o, Op op) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < o.iters; ++i) op();
  CUDA_OK(cudaStreamEndCapture(c.stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < o.warmup; ++i) CUDA_OK(cudaGraphLaunch(exec, c.stream));
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  std::vector<float> ms;
  for (int r = 0; r < o.replays; ++r) {
    CUDA_OK(cudaEventRecord(start, c.stream));
    CUDA_OK(cudaGraphLaunch(exec, c.stream));
    CUDA_OK(cudaEventRecord(stop, c.stream));
    CUDA_OK(cudaEventSynchronize(stop));
    float t;
    CUDA_OK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CUDA_OK(cudaEventDestroy(start));
  CUDA_OK(cudaEventDestroy(stop));
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  return 1000.0 * ms[ms.size() / 2] / o.iters;
}

int benchAllReduce(const Ctx& c, const Options& o) {
  const fcDataType_t type = parseType(o.dtype);
  const size_t es = fcTypeSize(type);
  size_t maxBytes = o.maxBytes.empty() ? 0 : parseBytes(o.maxBytes);
  if (maxBytes == 0) {  // default: the whole workspace
    const char* w = getenv("FC_WORKSPACE_BYTES");
    maxBytes = w && *w ? parseBytes(w) : (64u << 20);
  }
  const size_t minBytes = std::max(parseBytes(o.minBytes), es);
  void *in, *out;
  if (o.symmetric) FC_OK(fcMemAlloc(c.comm, &in, maxBytes));
  else CUDA_OK(cudaMalloc(&in, maxBytes));
  CUDA_OK(cudaMalloc(&out, maxBytes));
  int failures = 0;
  if (c.rank == 0) {
    cudaDeviceProp prop;
    int dev;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaGetDeviceProperties(&prop, dev));
    int version;
    fcGetVersion(&version);
    printf("# fc-bench allreduce: %d ranks, %s, libfusedcomm %d, graph of %d calls, %d replays "
           "(median), %d warm-up%s\n",
           c.nranks, prop.name, version, o.iters, o.replays, o.warmup,
           o.symmetric ? ", sendbuff from fcMemAlloc (oneshot0 = zero-copy one-shot)" : "");
    printf("# %12s %12s %9s %8s %10s %12s %12s %8s %6s\n", "size(B)", "count", "type", "algo",
           "time(us)", "algbw(GB/s)", "busbw(GB/s)", "maxerr", "check");
  }
  for (double b = double(minBytes); b <= double(maxBytes); b *= o.factor) {
    const size_t count = size_t(b) / es;
    const size_t bytes = count * es;
    // Check first: fresh integer inputs (exact sums), poisoned output.
    double err = 0;
    if (o.check) {
      const uint64_t seed = fcSplitMix(bytes * 31 + uint64_t(type));
      std::vector<char> h = fcPatternInput(type, count, seed, c.rank);
      // Everything on c.stream: stream order is what makes the op see the upload.
      CUDA_OK(cudaMemcpyAsync(in, h.data(), bytes, cudaMemcpyHostToDevice, c.stream));
      CUDA_OK(cudaMemsetAsync(out, 0xff, bytes, c.stream));
      FC_OK(fcAllReduceOneShot(in, out, count, type, fcSum, c.comm, c.stream));
      CUDA_OK(cudaMemcpyAsync(h.data(), out, bytes, cudaMemcpyDeviceToHost, c.stream));
      CUDA_OK(cudaStreamSynchronize(c.stream));
      err = fcPatternSumError(h.data(), type, count, seed, c.nranks);
    }
    const double us = maxOverRanks(c, timeGraph(c, o, [&] {
      FC_OK(fcAllReduceOneShot(in, out, count, type, fcSum, c.comm, c.stream));
    }));
    const double worstErr = maxOverRanks(c, std::isfinite(err) ? err : 1e30);
    const bool ok = !o.check || worstErr == 0.0;
    failures += !ok;
    if (c.rank == 0) {
      const double algbw = double(bytes) / (us * 1e3);
      const double busbw = algbw * 2.0 * (c.nranks - 1) / c.nranks;
      printf("  %12zu %12zu %9s %8s %10.2f %12.2f %12.2f %8.2g %6s\n", bytes, count, fcTypeName(type),
             o.symmetric ? "oneshot0" : "oneshot", us, algbw, busbw, worstErr, o.check ? (ok ? "OK" : "FAIL") : "-");
      fflush(stdout);
    }
  }
  if (o.symmetric) FC_OK(fcMemFree(c.comm, in));
  else CUDA_OK(cudaFree(in));
  CUDA_OK(cudaFree(out));
  if (c.rank == 0) printf("# %s\n", failures ? "FAILED: results differ from the reference" : "all results verified");
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fc-bench: libfusedcomm benchmarks (run one process per GPU under tools/fcrun)"};
  app.require_subcommand(1);
  Options o;
  CLI::App* ar = app.add_subcommand("allreduce", "one-shot all-reduce, sizes -b..-e");
  for (CLI::App* sub : {ar}) {
    sub->add_option("-b,--minbytes", o.minBytes, "smallest size in bytes (K/M/G suffixes)");
    sub->add_option("-e,--maxbytes", o.maxBytes, "largest size (default: the workspace)");
    sub->add_option("-f,--stepfactor", o.factor, "size multiplier")->check(CLI::Range(1.01, 1e6));
    sub->add_option("-d,--datatype", o.dtype, "bf16 | fp16 | fp32");
    sub->add_option("-n,--iters", o.iters, "calls per captured graph")->check(CLI::PositiveNumber);
    sub->add_option("-w,--warmup_iters", o.warmup, "warm-up graph replays");
    sub->add_option("-r,--replays", o.replays, "timed graph replays (median)")->check(CLI::PositiveNumber);
    sub->add_option("-c,--check", o.check, "verify results (1/0)");
    sub->add_flag("-s,--symmetric", o.symmetric, "sendbuff from fcMemAlloc (zero-copy)");
  }
  CLI11_PARSE(app, argc, argv);

  fcUniqueId id;
  if (!fcUniqueIdFromEnv(&id)) {
    fprintf(stderr, "fc-bench: FC_UNIQUE_ID is not set: run under tools/fcrun -n N\n");
    return 2;
  }
  Ctx c{};
  c.rank = fcEnvInt("FC_RANK", 0);
  c.nranks = fcEnvInt("FC_WORLD_SIZE", 1);
  CUDA_OK(cudaSetDevice(fcEnvInt("FC_LOCAL_RANK", c.rank)));
  FC_OK(fcCommInitRank(&c.comm, c.nranks, id, c.rank));
  CUDA_OK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  int rc = 0;
  if (ar->parsed()) rc = benchAllReduce(c, o);
  CUDA_OK(cudaStreamDestroy(c.stream));
  FC_OK(fcCommDestroy(c.comm));
  return rc;
}
