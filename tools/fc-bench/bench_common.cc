#include "bench.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <sstream>

#include "fc_data.h"

size_t parseBytes(const std::string& s) {
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  double scale = 1;
  if (*end == 'K' || *end == 'k') scale = 1024;
  else if (*end == 'M' || *end == 'm') scale = 1024.0 * 1024;
  else if (*end == 'G' || *end == 'g') scale = 1024.0 * 1024 * 1024;
  return size_t(v * scale);
}

std::vector<size_t> parseList(const std::string& s) {
  std::vector<size_t> v;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) v.push_back(parseBytes(item));
  return v;
}

std::vector<GemmShape> parseShapes(const std::string& s, size_t rowsMultiple) {
  std::vector<GemmShape> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ';');) {
    GemmShape sh{};
    if (sscanf(item.c_str(), "%zu,%zu,%zu", &sh.M, &sh.N, &sh.K) != 3 || sh.M == 0 || sh.N == 0 || sh.K == 0 ||
        sh.M % rowsMultiple != 0) {
      fprintf(stderr, "fc-bench: bad shape '%s' (want M,N,K;M,N,K...; M a multiple of %zu)\n", item.c_str(),
              rowsMultiple);
      exit(2);
    }
    out.push_back(sh);
  }
  return out;
}

fcDataType_t parseType(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return fcBfloat16;
  if (s == "fp16" || s == "half" || s == "float16") return fcFloat16;
  if (s == "fp32" || s == "float" || s == "float32") return fcFloat32;
  fprintf(stderr, "fc-bench: unknown dtype %s (bf16, fp16, fp32)\n", s.c_str());
  exit(2);
}

double roundTo(fcDataType_t type, double v) {
  char b[4];
  fcStore(b, type, 0, float(v));
  return fcLoad(b, type, 0);
}

GemmOperands::GemmOperands(const Ctx& ctx, size_t M_, size_t N_, size_t K_, fcDataType_t t, size_t cRows)
    : c(ctx), M(M_), N(N_), K(K_), type(t), seedA(fcSplitMix(M_ * 131 + N_ * 7 + K_)), seedB(seedA + 1) {
  const size_t es = fcTypeSize(type);
  CUDA_OK(cudaMalloc(&A, M * K * es));
  CUDA_OK(cudaMalloc(&B, K * N * es));
  CUDA_OK(cudaMalloc(&P, M * N * es));
  CUDA_OK(cudaMalloc(&C, cRows * N * es));
  std::vector<char> h = fcPatternInput(type, M * K, seedA, c.rank);
  CUDA_OK(cudaMemcpyAsync(A, h.data(), h.size(), cudaMemcpyHostToDevice, c.stream));
  h = fcPatternInput(type, K * N, seedB, c.rank);
  CUDA_OK(cudaMemcpyAsync(B, h.data(), h.size(), cudaMemcpyHostToDevice, c.stream));
  CUDA_OK(cudaStreamSynchronize(c.stream));
}

GemmOperands::~GemmOperands() {
  for (void* p : {A, B, P, C}) CUDA_OK(cudaFree(p));
}

GemmOperands::Sum GemmOperands::sumAt(fcOperation_t op, size_t row, size_t j) const {
  Sum s{0, 0};
  for (int r = 0; r < c.nranks; ++r) {
    double partial = 0;
    for (size_t k = 0; k < K; ++k)
      partial += double(fcPatternValue(seedA, r, row * K + k)) *
                 fcPatternValue(seedB, r, op == fcOpN ? k * N + j : j * K + k);
    s.exact += partial;
    s.ofRounded += roundTo(type, partial);
  }
  return s;
}

// Share `values` (one per rank) with every rank through our own all-reduce: each
// rank fills its slot of a zeroed vector, the sum then holds every rank's value.
std::vector<float> gatherFloats(const Ctx& c, const std::vector<float>& mine, size_t perRank) {
  std::vector<float> h(perRank * size_t(c.nranks), 0.f);
  std::copy(mine.begin(), mine.end(), h.begin() + ptrdiff_t(perRank * size_t(c.rank)));
  float* d;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&d), h.size() * sizeof(float)));
  CUDA_OK(cudaMemcpyAsync(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice, c.stream));
  FC_OK(fcAllReduceOneShot(d, d, h.size(), fcFloat32, fcSum, c.comm, c.stream));
  CUDA_OK(cudaMemcpyAsync(h.data(), d, h.size() * sizeof(float), cudaMemcpyDeviceToHost, c.stream));
  CUDA_OK(cudaStreamSynchronize(c.stream));
  CUDA_OK(cudaFree(d));
  return h;
}

double maxOverRanks(const Ctx& c, double v) {
  std::vector<float> all = gatherFloats(c, {float(v)}, 1);
  return *std::max_element(all.begin(), all.end());
}

// NCCL's unique id from rank 0, byte by byte as exact fp32 sums.
bool initNccl(Ctx& c, std::string* why) {
  if (!c.nccl.load(why)) return false;
  NcclApi::UniqueId id{};
  std::vector<float> bytes(sizeof id.internal, 0.f);
  if (c.rank == 0) {
    if (c.nccl.getUniqueId(&id) != 0) return *why = "ncclGetUniqueId failed", false;
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = float(uint8_t(id.internal[i]));
  }
  std::vector<float> all = gatherFloats(c, c.rank == 0 ? bytes : std::vector<float>(bytes.size(), 0.f),
                                        bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) id.internal[i] = char(uint8_t(all[i]));
  const int r = c.nccl.commInitRank(&c.ncclComm, c.nranks, id, c.rank);
  if (r != 0) return *why = std::string("ncclCommInitRank: ") + c.nccl.getErrorString(r), false;
  return true;
}

fcComm_t commWithEnv(const Ctx& c, const char* var, const char* value) {
  fcUniqueId id{};
  std::vector<float> bytes(sizeof id.internal, 0.f);
  if (c.rank == 0) {
    FC_OK(fcGetUniqueId(&id));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = float(uint8_t(id.internal[i]));
  }
  std::vector<float> all = gatherFloats(c, bytes, bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) id.internal[i] = char(uint8_t(all[i]));
  ScopedEnv env(var, value);
  fcComm_t comm;
  FC_OK(fcCommInitRank(&comm, c.nranks, id, c.rank));
  return comm;
}

fcComm_t soloComm(const char* agmmAlgo) {
  fcUniqueId id;
  FC_OK(fcGetUniqueId(&id));
  // cuBLASLt's GEMM at one rank, whatever FC_MMAR_ALGO forces on the measured communicator
  // (fused would run the one kernel at one rank too).
  ScopedEnv env("FC_AGMM_ALGO", agmmAlgo), cublas("FC_DECODE_GEMM", "0"), mmar("FC_MMAR_ALGO", "unfused");
  fcComm_t solo;
  FC_OK(fcCommInitRank(&solo, 1, id, 0));
  return solo;
}

// The edges of `graph` with their types (the dot print leaves them out), one a line:
// "from -> to type T from_port P", nodes numbered as cudaGraphGetNodes lists them.
static void dumpEdges(cudaGraph_t graph, const std::string& path) {
  size_t nodes = 0, edges = 0;
  CUDA_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
  std::vector<cudaGraphNode_t> node(nodes);
  CUDA_OK(cudaGraphGetNodes(graph, node.data(), &nodes));
  CUDA_OK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &edges));
  std::vector<cudaGraphNode_t> from(edges), to(edges);
  std::vector<cudaGraphEdgeData> data(edges);
  CUDA_OK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &edges));
  auto index = [&](cudaGraphNode_t n) { return size_t(std::find(node.begin(), node.end(), n) - node.begin()); };
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return;
  for (size_t e = 0; e < edges; ++e)
    fprintf(f, "%zu -> %zu type %d from_port %d\n", index(from[e]), index(to[e]), int(data[e].type),
            int(data[e].from_port));
  fclose(f);
}

// Median time of one call (us): graph replays of `iters` calls of `op`.
double timeGraph(const Ctx& c, const Options& o, const std::function<void()>& op) { return timeGraphs(c, o, {op})[0]; }

std::vector<double> timeGraphs(const Ctx& c, const Options& o, const std::vector<std::function<void()>>& ops) {
  const size_t n = ops.size();
  std::vector<cudaGraphExec_t> exec(n);
  for (size_t k = 0; k < n; ++k) {
    // One call outside capture first, as an application's warm-up would: one-time
    // work (cuBLASLt's and NCCL's setup) happens there, not in the graph.
    ops[k]();
    CUDA_OK(cudaStreamSynchronize(c.stream));
    cudaGraph_t graph;
    CUDA_OK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < o.iters; ++i) ops[k]();
    CUDA_OK(cudaStreamEndCapture(c.stream, &graph));
    // FC_BENCH_DOT=DIR: each timed graph as Graphviz (rank 0; edge types included), to
    // see what a capture made of an op's launches.
    if (const char* dir = getenv("FC_BENCH_DOT"); dir != nullptr && c.rank == 0) {
      static int dumped = 0;
      const std::string path = std::string(dir) + "/graph-" + std::to_string(dumped++) + ".dot";
      CUDA_OK(cudaGraphDebugDotPrint(graph, path.c_str(), cudaGraphDebugDotFlagsVerbose));
      dumpEdges(graph, path + ".edges");
    }
    CUDA_OK(cudaGraphInstantiate(&exec[k], graph, 0));
    CUDA_OK(cudaGraphDestroy(graph));
  }
  for (int i = 0; i < o.warmup; ++i)
    for (cudaGraphExec_t e : exec) CUDA_OK(cudaGraphLaunch(e, c.stream));
  // One pair of events per replay, so that "queued" replays need no synchronisation.
  const bool barrier = o.replaysStart == "barrier", queued = o.replaysStart == "queued";
  std::vector<cudaEvent_t> events(2 * n * size_t(o.replays));
  for (cudaEvent_t& e : events) CUDA_OK(cudaEventCreate(&e));
  auto startOf = [&](int r, size_t k) { return events[2 * (size_t(r) * n + k)]; };
  auto stopOf = [&](int r, size_t k) { return events[2 * (size_t(r) * n + k) + 1]; };
  for (int r = 0; r < o.replays; ++r) {
    for (size_t k = 0; k < n; ++k) {
      cudaEvent_t start = startOf(r, k), stop = stopOf(r, k);
      if (barrier) FC_OK(fcBarrier(c.comm, c.stream));
      CUDA_OK(cudaEventRecord(start, c.stream));
      CUDA_OK(cudaGraphLaunch(exec[k], c.stream));
      CUDA_OK(cudaEventRecord(stop, c.stream));
      if (!queued) CUDA_OK(cudaEventSynchronize(stop));
    }
  }
  CUDA_OK(cudaStreamSynchronize(c.stream));
  std::vector<std::vector<float>> ms(n);
  for (int r = 0; r < o.replays; ++r) {
    for (size_t k = 0; k < n; ++k) {
      float t;
      CUDA_OK(cudaEventElapsedTime(&t, startOf(r, k), stopOf(r, k)));
      ms[k].push_back(t);
    }
  }
  for (cudaEvent_t e : events) CUDA_OK(cudaEventDestroy(e));
  std::vector<double> us(n);
  for (size_t k = 0; k < n; ++k) {
    std::sort(ms[k].begin(), ms[k].end());
    us[k] = 1000.0 * ms[k][ms[k].size() / 2] / o.iters;
    CUDA_OK(cudaGraphExecDestroy(exec[k]));
  }
  return us;
}

std::vector<fcComm_t> engineStageComms(const Ctx& c, const char* algoVar, const char* stageVar,
                                       const std::vector<const char*>& values) {
  ScopedEnv engine(algoVar, "engine");
  std::vector<fcComm_t> comms;
  for (const char* v : values) comms.push_back(commWithEnv(c, stageVar, v));
  return comms;
}

std::vector<double> timeGraphsMax(const Ctx& c, const Options& o, const std::vector<std::function<void()>>& ops) {
  std::vector<double> us = timeGraphs(c, o, ops);
  maxOverRanks(c, us);
  return us;
}

void printStagesRow(const Ctx& c, size_t a, size_t b, size_t d, const std::vector<double>& us, int decimals,
                    const std::string& last) {
  if (c.rank != 0) return;
  printf("%zu,%zu,%zu", a, b, d);
  for (double u : us) printf(",%.*f", decimals, u);
  printf(",%s\n", last.c_str());
  fflush(stdout);
}

EagerTimes timeEager(const Ctx& c, const Options& o, const std::function<void()>& op) {
  using Clock = std::chrono::steady_clock;
  auto us = [](Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  // Start together, warmed up.
  op();
  FC_OK(fcBarrier(c.comm, c.stream));
  CUDA_OK(cudaStreamSynchronize(c.stream));
  std::vector<double> one;
  for (int i = 0; i < o.iters; ++i) {
    const auto t0 = Clock::now();
    op();
    CUDA_OK(cudaStreamSynchronize(c.stream));
    one.push_back(us(Clock::now() - t0));
  }
  std::sort(one.begin(), one.end());
  FC_OK(fcBarrier(c.comm, c.stream));
  CUDA_OK(cudaStreamSynchronize(c.stream));
  const auto t0 = Clock::now();
  for (int i = 0; i < o.iters; ++i) op();
  const auto t1 = Clock::now();
  CUDA_OK(cudaStreamSynchronize(c.stream));
  const auto t2 = Clock::now();
  EagerTimes t;
  t.syncUs = maxOverRanks(c, one[one.size() / 2]);
  t.b2bUs = maxOverRanks(c, us(t2 - t0) / o.iters);
  t.hostUs = maxOverRanks(c, us(t1 - t0) / o.iters);
  return t;
}

FusedEager timeFusedEager(const Ctx& c, const Options& o, const std::function<void()>& fused,
                          const std::function<void()>& unfused) {
  FusedEager t;
  if (o.eager) {
    t.fused = timeEager(c, o, fused);
    t.unfused = timeEager(c, o, unfused);
  }
  return t;
}

std::string describeRun(const Ctx& c) {
  cudaDeviceProp prop;
  int dev, version;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaGetDeviceProperties(&prop, dev));
  fcGetVersion(&version);
  return std::to_string(c.nranks) + " ranks, " + prop.name + ", libfusedcomm " + std::to_string(version);
}

std::string describeNccl(const Ctx& c, bool haveNccl, const std::string& why) {
  int version = 0;
  if (haveNccl) c.nccl.getVersion(&version);
  return haveNccl ? std::to_string(version) : "not run (" + why + ")";
}

void printGemmHeader(const Ctx& c, const Options& o, const char* mode, bool haveNccl, const std::string& why) {
  if (c.rank != 0) return;
  const bool agmm = std::string(mode) == "agmm";
  printf("# fc-bench %s: %d ranks, graph of %d calls, %d replays (median), %d warm-up; NCCL: %s\n", mode,
         c.nranks, o.iters, o.replays, o.warmup, haveNccl ? "yes" : ("not run (" + why + ")").c_str());
  printf("M,N,K,type,transB,gemm_us,nccl_gemm_us,fc_gemm_us,fused_us,fused_over_gemm,unfused_over_fused,"
         "tflops,relerr,check,fused_eager_us,fused_b2b_us,fused_host_us,unfused_eager_us,unfused_b2b_us%s\n",
         agmm ? ",engine_us,engine_over_gemm,engine_relerr,cutlass_gemm_us,pipeline_us"
              : ",engine_us,engine_over_gemm,engine_relerr");
}

void maxOverRanks(const Ctx& c, std::vector<double>& us) {
  for (double& u : us) u = maxOverRanks(c, u);
}

std::vector<CallerForm> parseForms(const std::string& forms, const std::string& agathered) {
  auto items = [](const std::string& s) {
    std::vector<std::string> v;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) v.push_back(item);
    return v;
  };
  std::vector<CallerForm> out;
  for (const std::string& a : items(forms.empty() ? "plain,symmetric" : forms)) {
    if (a != "plain" && a != "symmetric") {
      fprintf(stderr, "fc-bench: unknown form '%s' (plain, symmetric)\n", a.c_str());
      exit(2);
    }
    for (const std::string& g : items(agathered.empty() ? "0,1" : agathered)) {
      if (g != "0" && g != "1") {
        fprintf(stderr, "fc-bench: --agathered takes 0, 1 or 0,1, not '%s'\n", g.c_str());
        exit(2);
      }
      out.push_back({a == "symmetric", g == "1"});
    }
  }
  return out;
}

std::string msweepShapes(const std::string& mode, int nranks) {
  // (N, K) at TP 2, scaled to `nranks` on the sharded dimension, as the PyTorch
  // benchmarks scale their layer lists.
  const bool agmm = mode == "agmm";
  const size_t layers[2][2] = {{agmm ? 3072u : 4096u, agmm ? 4096u : 2048u},
                               {agmm ? 14336u : 4096u, agmm ? 4096u : 7168u}};
  std::string out;
  for (const auto& nk : layers)
    for (size_t m = 512; m <= 32768; m *= 2) {
      const size_t n = agmm ? nk[0] * 2 / size_t(nranks) : nk[0], k = agmm ? nk[1] : nk[1] * 2 / size_t(nranks);
      out += (out.empty() ? "" : ";") + std::to_string(m) + "," + std::to_string(n) + "," + std::to_string(k);
    }
  return out;
}

Options timingFor(const Options& o, double flops) {
  Options t = o;
  if (!o.timingGiven && flops >= 1e12) {
    t.iters = 2;
    t.replays = std::min(o.replays, 6);
    t.warmup = 1;
  }
  return t;
}

void printFormsHeader(const Ctx& c, const Options& o, const char* mode, bool haveNccl, const std::string& why) {
  if (c.rank != 0) return;
  const bool agmm = std::string(mode) == "agmm";
  printf("# fc-bench %s caller forms: %s, graph of %d calls, %d replays (median), %d warm-up (GEMMs of >= 1 TFLOP: "
         "see calls, replays), every column of a shape interleaved; NCCL: %s\n",
         mode, describeRun(c).c_str(), o.iters, o.replays, o.warmup, describeNccl(c, haveNccl, why).c_str());
  printf("M,N,K,type,transB,a%s,gemm_us,comm_us,comm_from,nccl_gemm_us,fc_gemm_us,op_us,op_over_gemm,"
         "op_over_nccl_gemm,fixed_us,relerr,check,calls,replays\n",
         agmm ? ",agathered" : "");
}

CommCandidates::CommCandidates(const Ctx& c, const char* algoVar) : c_(c) {
  names = {"plain-auto", "symmetric-auto", "symmetric-sm", "symmetric-ce"};
  owned_ = {commWithEnv(c, algoVar, "sm"), commWithEnv(c, algoVar, "ce")};
  comms = {c.comm, c.comm, owned_[0], owned_[1]};
  symmetric_ = {false, true, true, true};
}

CommCandidates::~CommCandidates() {
  unbind();
  for (fcComm_t comm : owned_) FC_OK(fcCommDestroy(comm));
}

void CommCandidates::bind(void* plain, size_t bytes) {
  unbind();
  for (size_t i = 0; i < comms.size(); ++i) {
    void* p = plain;
    if (symmetric_[i]) {
      FC_OK(fcMemAlloc(comms[i], &p, bytes));
      CUDA_OK(cudaMemcpyAsync(p, plain, bytes, cudaMemcpyDeviceToDevice, c_.stream));
    }
    send.push_back(p);
  }
  CUDA_OK(cudaStreamSynchronize(c_.stream));
}

void CommCandidates::unbind() {
  for (size_t i = 0; i < send.size(); ++i)
    if (symmetric_[i]) FC_OK(fcMemFree(comms[i], send[i]));
  send.clear();
}

int printFormRows(const Ctx& c, const GemmShape& sh, fcOperation_t op, fcDataType_t type, bool agmm,
                  const std::vector<CallerForm>& forms, const std::vector<double>& relerr,
                  const std::vector<double>& us, const CommCandidates& comm, bool haveNccl, const Options& t) {
  const size_t firstComm = 2, firstForm = firstComm + comm.comms.size(), ncclAt = firstForm + forms.size();
  const size_t best = size_t(std::min_element(us.begin() + firstComm, us.begin() + firstForm) - us.begin());
  const double gemmUs = us[0], fcUs = us[1], commUs = us[best], ncclUs = haveNccl ? us[ncclAt] : 0;
  int failures = 0;
  for (size_t k = 0; k < forms.size(); ++k) {
    const double opUs = us[firstForm + k];
    const bool ok = relerr[k] == 0.0;
    failures += !ok;
    if (c.rank != 0) continue;
    char agathered[8] = "";
    if (agmm) snprintf(agathered, sizeof agathered, ",%d", int(forms[k].agathered));
    printf("%zu,%zu,%zu,%s,%s,%s%s,%.1f,%.1f,%s,%.1f,%.1f,%.1f,%.3f,%.3f,%.1f,%g,%s,%d,%d\n", sh.M, sh.N, sh.K,
           fcTypeName(type), op == fcOpN ? "N" : "T", forms[k].symmetric ? "symmetric" : "plain", agathered, gemmUs,
           commUs, comm.names[best - firstComm].c_str(), ncclUs, fcUs, opUs, opUs / gemmUs,
           haveNccl ? opUs / ncclUs : 0.0, opUs - std::max(gemmUs, commUs), relerr[k], ok ? "OK" : "FAIL", t.iters,
           t.replays);
  }
  if (c.rank == 0) fflush(stdout);
  return failures;
}
