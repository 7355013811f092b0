// Shared by the fc-bench modes: options, the per-rank context, timing of CUDA-graph
// replays and the small all-reduce based helpers that combine per-rank results.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "fusedcomm.h"
#include "nccl.h"

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

enum class Mode { AllReduce, ReduceScatter, AllGather };

struct Options {
  std::string minBytes = "8", maxBytes = "", dtype = "bf16", algo = "auto";
  double factor = 2;
  int iters = 20, warmup = 5, replays = 20;
  bool check = true, symmetric = false, nccl = true, csv = false, json = false, eager = true;
  // How graph replays start (--replays-start): "sync" (the default), each after the
  // host has synchronised on the one before, so each rank's replay starts when its own
  // host gets there (a skew between the ranks' hosts is waited out inside the replay of
  // whichever rank is early); "barrier", an fcBarrier on the stream first (untimed): the
  // replays start together on every rank; "queued", all replays enqueued back to back,
  // one synchronisation at the end.
  std::string replaysStart = "sync";
  // -n or -r given on the command line: the caller-form tables then keep them for
  // every shape instead of timing the largest GEMMs with fewer calls (timingFor).
  bool timingGiven = false;
};

struct Ctx {
  fcComm_t comm;
  int rank, nranks;
  cudaStream_t stream;
  NcclApi nccl;
  NcclApi::Comm ncclComm = nullptr;  // null: no NCCL columns
};

size_t parseBytes(const std::string& s);
// A comma-separated list of sizes (K/M/G suffixes as parseBytes).
std::vector<size_t> parseList(const std::string& s);
// "M,N,K;M,N,K;...": the GEMM shapes of the fused modes, every dimension > 0 and M a
// multiple of rowsMultiple; anything else exits with a message.
struct GemmShape {
  size_t M, N, K;
};
std::vector<GemmShape> parseShapes(const std::string& s, size_t rowsMultiple = 1);
fcDataType_t parseType(const std::string& s);

// Share `values` (one per rank) with every rank through our own all-reduce.
std::vector<float> gatherFloats(const Ctx& c, const std::vector<float>& mine, size_t perRank);
double maxOverRanks(const Ctx& c, double v);

// NCCL's communicator next to ours (rank 0's id shared through our all-reduce).
bool initNccl(Ctx& c, std::string* why);

// An environment variable set to `value` (NULL: left as it is) for this object's
// lifetime, then restored: the FC_* choices are read when a communicator is made.
class ScopedEnv {
 public:
  ScopedEnv(const char* var, const char* value) : var_(var), had_(false) {
    if (value == nullptr) return;
    const char* before = getenv(var);
    had_ = before != nullptr;
    saved_ = had_ ? before : "";
    set_ = true;
    setenv(var, value, 1);
  }
  ~ScopedEnv() {
    if (!set_) return;
    if (had_) setenv(var_, saved_.c_str(), 1);
    else unsetenv(var_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* var_;
  bool had_, set_ = false;
  std::string saved_;
};

// Another communicator of the same ranks, created with the environment variable
// `var` set to `value` (the FC_*_ALGO choices are read at init): to time a forced
// algorithm beside the default one in the same run.
fcComm_t commWithEnv(const Ctx& c, const char* var, const char* value);

// One communicator of the same ranks per value of `stageVar` (a *stages mode's
// columns), each with `algoVar` set to "engine".
std::vector<fcComm_t> engineStageComms(const Ctx& c, const char* algoVar, const char* stageVar,
                                       const std::vector<const char*>& values);

// A one-rank communicator of this process (the GEMM-alone columns: the fused GEMM ops
// at one rank are their GEMM), created with FC_AGMM_ALGO set to `agmmAlgo` (NULL: as
// the environment has it) and FC_DECODE_GEMM=0: its GEMMs are cuBLASLt's, the baseline
// a user without us runs (the fused ops' own decode GEMM is theirs: src/gemm/decode).
fcComm_t soloComm(const char* agmmAlgo = nullptr);

// Median time of one call (us): graph replays of `iters` calls of `op`.
double timeGraph(const Ctx& c, const Options& o, const std::function<void()>& op);
// Several ops timed interleaved: each round replays every op's graph once, in turn;
// the median per op (us per call). For the GEMM modes, where a GPU at its power limit
// clocks down within a run and whatever is timed first would gain.
std::vector<double> timeGraphs(const Ctx& c, const Options& o, const std::vector<std::function<void()>>& ops);
// timeGraphs, each op's time the max over ranks (what every table reports).
std::vector<double> timeGraphsMax(const Ctx& c, const Options& o, const std::vector<std::function<void()>>& ops);
// A *stages table's row, printed by rank 0: its three leading sizes, each time with
// `decimals` decimals, then `last` (the row's check).
void printStagesRow(const Ctx& c, size_t a, size_t b, size_t d, const std::vector<double>& us, int decimals,
                    const std::string& last);

// Eager calls, as a serving loop makes them (us per call, max over ranks):
//   syncUs  one call then cudaStreamSynchronize, wall time, median of `iters`;
//   b2bUs   `iters` calls back to back, then one synchronize: wall time per call;
//   hostUs  the time the host spends issuing one of those back-to-back calls.
struct EagerTimes {
  double syncUs = 0, b2bUs = 0, hostUs = 0;
};
EagerTimes timeEager(const Ctx& c, const Options& o, const std::function<void()>& op);

// The GEMM modes' eager columns: the fused op and its unfused counterpart (NCCL's
// when present, else ours), each through timeEager; zeros without --eager.
struct FusedEager {
  EagerTimes fused, unfused;
};
FusedEager timeFusedEager(const Ctx& c, const Options& o, const std::function<void()>& fused,
                          const std::function<void()>& unfused);

// v rounded to `type` (through fp32, as the library's kernels round).
double roundTo(fcDataType_t type, double v);

// A GEMM + collective problem's operands on this rank (mmrs.cc, mmar.cc), allocated and
// filled here: A [M, K] and B (K * N elements: [K, N] or [N, K]), integer patterns of
// two seeds of the shape, each rank's its own, so that every product is exact; P [M, N]
// for the unfused GEMM's product; C [cRows, N] for the fused op's output.
struct GemmOperands {
  const Ctx& c;
  size_t M, N, K;
  fcDataType_t type;
  uint64_t seedA, seedB;
  void *A = nullptr, *B = nullptr, *P = nullptr, *C = nullptr;

  GemmOperands(const Ctx& ctx, size_t M, size_t N, size_t K, fcDataType_t type, size_t cRows);
  ~GemmOperands();
  GemmOperands(const GemmOperands&) = delete;
  GemmOperands& operator=(const GemmOperands&) = delete;

  // Element [row][j] of the sum over ranks of A x op(B): exact, and with each rank's
  // product rounded to the type first (what a GEMM in the type computes before the sum).
  struct Sum {
    double exact, ofRounded;
  };
  Sum sumAt(fcOperation_t op, size_t row, size_t j) const;
};

// fc-bench agmm (agmm.cc): shapes "M,N,K;...", transB "n" | "t" | "both".
int benchAgmm(Ctx& c, const Options& o, const std::string& shapes, const std::string& transB);

// fc-bench mmrsstages (mmrs.cc): the GEMM + reduce-scatter engine path's stages left out.
int benchMmrsStages(Ctx& c, const Options& o, const std::string& shapes);

// fc-bench mmrs (mmrs.cc): shapes "M,N,K;...", transB "n" | "t" | "both".
int benchMmrs(Ctx& c, const Options& o, const std::string& shapes, const std::string& transB);

// The caller forms of the sequence-parallel pair (issue 45): fc-bench agmm / mmrs with
// --forms, --agathered or --msweep. A is a plain device buffer ("plain") or symmetric
// memory from fcMemAlloc ("symmetric"); fcAllGatherMatmul also with and without the
// gathered A as an output (agathered 0 / 1). One row per shape and form, every form
// timed in the same interleaved run as the GEMM alone, the communication alone and
// the unfused pairs (agmm.cc, mmrs.cc).
struct CallerForm {
  bool symmetric;  // A from fcMemAlloc
  bool agathered;  // fcAllGatherMatmul's Agathered output (always false for mmrs)
};
// --forms "plain,symmetric" crossed with --agathered "0,1" (empty: both); exits on a bad name.
std::vector<CallerForm> parseForms(const std::string& forms, const std::string& agathered);
// fc-bench agmmstages (agmm.cc): the engine path's stages left out, pieces 1 / 2 / 4, in
// one caller form.
int benchAgmmStages(Ctx& c, const Options& o, const std::string& shapes, const CallerForm& form);
int benchAgmmForms(Ctx& c, const Options& o, const std::string& shapes, const std::string& transB,
                   const std::vector<CallerForm>& forms);
int benchMmrsForms(Ctx& c, const Options& o, const std::string& shapes, const std::string& transB,
                   const std::vector<CallerForm>& forms);
// --msweep's shapes "M,N,K;..." for mode "agmm" or "mmrs" at `nranks` ranks: M 512-32768
// at two public layers of Llama-3-8B (bench-torch-agmm.py's and bench-torch-mmrs.py's
// lists), tensor-parallel over the ranks: agmm QKV (N 6144 / W, K 4096) and gate_up
// (N 28672 / W, K 4096); mmrs o_proj (N 4096, K 4096 / W) and down_proj (N 4096,
// K 14336 / W).
std::string msweepShapes(const std::string& mode, int nranks);
// The timing of one shape of the caller-form tables: `o`, except that a GEMM of at
// least 1 TFLOP (per rank) without -n / -r given is timed as graphs of 2 calls, 6
// replays, 1 warm-up: at M 16384-32768 a call takes 3-6 ms, and the defaults' 5 x
// (10 + 2) calls per column over a dozen columns would take most of the run.
Options timingFor(const Options& o, double flops);
// The caller-form tables' preamble on rank 0: the run line and the CSV header.
void printFormsHeader(const Ctx& c, const Options& o, const char* mode, bool haveNccl, const std::string& why);
// Max over ranks of each time (in place).
void maxOverRanks(const Ctx& c, std::vector<double>& us);
struct CommCandidates;
// The caller-form table's rows of one shape (rank 0 prints; every rank counts): `us`
// the columns timeGraphs measured (max over ranks) in the order [the GEMM alone, our
// collective + the GEMM, comm's candidates..., each form's op..., NCCL + the GEMM (if
// haveNccl)]; relerr per form; agmm: the table has the Agathered column. Returns the
// forms whose check failed.
int printFormRows(const Ctx& c, const GemmShape& sh, fcOperation_t op, fcDataType_t type, bool agmm,
                  const std::vector<CallerForm>& forms, const std::vector<double>& relerr,
                  const std::vector<double>& us, const CommCandidates& comm, bool haveNccl, const Options& t);

// "The communication alone" of the caller-form tables: the op's collective on the same
// bytes, our fastest, so that the fixed cost (op - max(GEMM alone, communication
// alone)) is not flattered by a slow collective. Candidates: the sendbuff plain (the
// communicator's auto choice) and symmetric (zero-copy: auto, and the SM and copy-engine
// algorithms forced through `algoVar` on communicators of their own, each with its own
// fcMemAlloc sendbuff, since symmetric memory belongs to one communicator).
struct CommCandidates {
  std::vector<std::string> names;  // plain-auto, symmetric-auto, symmetric-sm, symmetric-ce
  std::vector<fcComm_t> comms;     // each candidate's communicator
  std::vector<void*> send;         // each candidate's sendbuff (bind())

  CommCandidates(const Ctx& c, const char* algoVar);
  ~CommCandidates();
  CommCandidates(const CommCandidates&) = delete;
  CommCandidates& operator=(const CommCandidates&) = delete;
  // Sendbuffs of `bytes` for one shape: `plain` itself, and symmetric copies of it.
  void bind(void* plain, size_t bytes);
  void unbind();

 private:
  const Ctx& c_;
  std::vector<fcComm_t> owned_;
  std::vector<bool> symmetric_;
};

// fc-bench mmar (mmar.cc): shapes "M,N,K;..." (empty: the default layers at each of
// `tokens`, comma-separated), transB "n" | "t" | "both", norm "0" | "1" | "both";
// symmetricC: the plain form timed also with C from fcMemAlloc (a column of its own);
// coldWeight: every call reads its own copy of B (a ring spanning twice the L2), as each
// layer of a model's decode step reads a weight long evicted from L2.
int benchMmar(Ctx& c, const Options& o, const std::string& shapes, const std::string& tokens,
              const std::string& transB, const std::string& norm, bool symmetricC, bool coldWeight);

// fc-bench mmarstages (mmar.cc): fcMatmulAllReduce's engine path with parts left out.
int benchMmarStages(Ctx& c, const Options& o, const std::string& shapes);

// fc-bench arnorm (arnorm.cc): token counts and hidden sizes, comma-separated.
int benchArnorm(Ctx& c, const Options& o, const std::string& tokens, const std::string& hiddens);

// The all-reduce + RMSNorm benchmarks' inputs for (tokens, hidden), uploaded to in,
// res and w (synchronously): integer patterns, so that the rank sum and the residual
// add are exact in every dtype; the residual and weight are kept for checks.
struct NormInputs {
  uint64_t seed;
  std::vector<char> residual, weight;
};
NormInputs uploadNormInputs(const Ctx& c, fcDataType_t type, size_t tokens, size_t hidden, void* in, void* res,
                            void* w);

// fc-bench stages: the Lamport one-shot's stages left out or run twice (stages.cc).
int benchStages(Ctx& c, const Options& o);

// fc-bench normstages: the all-reduce + RMSNorm Lamport kernel's stages left out, and
// its prefetching variant (stages.cc); token counts and hidden sizes comma-separated.
int benchNormStages(Ctx& c, const Options& o, const std::string& tokens, const std::string& hiddens);

// The run line's common part: "<n> ranks, <GPU>, libfusedcomm <version>"; and NCCL's
// version, or why it was not run.
std::string describeRun(const Ctx& c);
std::string describeNccl(const Ctx& c, bool haveNccl, const std::string& why);

// The fused-GEMM modes' preamble on rank 0: the run line and the CSV header.
void printGemmHeader(const Ctx& c, const Options& o, const char* mode, bool haveNccl, const std::string& why);
