// gemm-configs: the GEMM engine's CUTLASS kernel alone, in several configurations,
// against cuBLASLt (the library's Gemm), one GPU, bf16, D [M, N] = A [M, K] x B^T
// with B [N, K] (nn.Linear's weight). Every configuration and cuBLASLt run the same
// inputs (small integers: every product and sum is exact, so all must agree bit for
// bit) and are timed *interleaved*: each round replays every candidate's graph once,
// in turn, and the medians over the rounds are reported. Timed one after the other,
// a large GEMM measured later runs on a hotter, lower-clocked GPU (at ~700 W an H200
// holds its power limit by lowering the clock), which favoured whoever went first.
//
//   build/tools/probes/gemm-configs [rounds] [M,N,K ...]
// Output: CSV, one line per shape, times in us per GEMM (graph of 5 GEMMs), and the
// configuration cuBLASLt's heuristic picked (its tile, stages and cluster enums,
// cublasLt.h: the tile is in its column-major view, N x M of ours).
// FC_PROBE_SWIZZLES=0,1,4 times every CUTLASS candidate at each of these swizzles
// (EngineGemm::swizzle; 0: the engine's rule), one column each. FC_PROBE_COLUMNS=a,b
// times only these candidates (names as in the header, without _us) beside cuBLASLt.
// FC_PROBE_B=kn: B [K, N] (fcOpN) instead, the candidates built for it only.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "gemm/engine/engine.h"
#include "gemm/gemm.h"
#include "gemm_configs.h"

namespace fc::engine {
// The library's own instantiations (src/gemm/engine).
fcResult_t runAllGatherGemm_bf16_t_128x256c2x1(const EngineGemm&, cudaStream_t);
fcResult_t runAllGatherGemm_bf16_t_128x128c2x1p(const EngineGemm&, cudaStream_t);
fcResult_t runAllGatherGemm_bf16_t_128x192c2x1(const EngineGemm&, cudaStream_t);
fcResult_t runAllGatherGemm_bf16_t_128x96c2x1p(const EngineGemm&, cudaStream_t);
fcResult_t runAllGatherGemm_bf16_t_128x224c2x1(const EngineGemm&, cudaStream_t);
fcResult_t runAllGatherGemm_bf16_t_128x160c2x1(const EngineGemm&, cudaStream_t);
// ... and with B [K, N] (fcOpN; FC_PROBE_B=kn).
fcResult_t runAllGatherGemm_bf16_n_128x256c2x1(const EngineGemm&, cudaStream_t);
fcResult_t runAllGatherGemm_bf16_n_128x192c2x1(const EngineGemm&, cudaStream_t);
fcResult_t runAllGatherGemm_bf16_n_128x128c2x1p(const EngineGemm&, cudaStream_t);
fcResult_t runAllGatherGemm_bf16_n_128x96c2x1p(const EngineGemm&, cudaStream_t);
fcResult_t runAllGatherGemm_bf16_n_128x224c2x1(const EngineGemm&, cudaStream_t);
fcResult_t runAllGatherGemm_bf16_n_128x160c2x1(const EngineGemm&, cudaStream_t);
// GEMM + reduce-scatter's, each tile signalling a counter (here two counters in this
// GPU's memory, as if the rows were two ranks' blocks): the cost of the signals.
fcResult_t runScatterGemm_bf16_t_128x256c2x1(const EngineGemm&, cudaStream_t);
fcResult_t runScatterGemm_bf16_t_128x128c2x1p(const EngineGemm&, cudaStream_t);
fcResult_t runScatterChainGemm_bf16_t_128x128c2x1p(const EngineGemm&, cudaStream_t);
}  // namespace fc::engine

namespace {

// The scatter kernel with its signals off (NULL counters): what the wrapper costs
// without them.
fcResult_t scatterNoSignal(const fc::engine::EngineGemm& g, cudaStream_t stream) {
  fc::engine::EngineGemm quiet = g;
  quiet.signal.counters = nullptr;
  return fc::engine::runScatterGemm_bf16_t_128x128c2x1p(quiet, stream);
}

// The scatter kernel with an own block, as in the epilogue add (the op's default flow at
// 2 ranks): the tiles of the rows the signals call ours (the second half, or all rows)
// add a "peer partial" of zeros (so the result stays bit-equal) through the epilogue's
// C pipeline, without waiting for it (no counters): what the own tiles' C loads cost.
const void* gZeroPartial = nullptr;  // [M, N] zeros, set per shape
fcResult_t scatterOwnAdd(const fc::engine::EngineGemm& g, cudaStream_t stream) {
  fc::engine::EngineGemm own = g;
  const int64_t first = g.signal.self * g.signal.blockRows;
  own.source.C = gZeroPartial;
  own.source.D = static_cast<char*>(g.D) + size_t(first) * g.N * 2;
  own.source.firstRow = first;
  own.source.blockRows = own.source.pieceRows = g.signal.blockRows;
  return fc::engine::runScatterGemm_bf16_t_128x128c2x1p(own, stream);
}

// The chain's kernel (3-8 ranks) with every tile an own tile, as the last step of the
// chain computes them: an fp32 "running sum" of zeros read through the epilogue's C
// pipeline (no waits: no counters), the fp32 sum stored into a scratch [M, N] and the
// rounded one into D by the auxiliary store: the chain's heaviest epilogue, against the
// scatter kernel's (the op's steps 2..W-1 store the fp32 sum only).
const void* gZeroSums = nullptr;  // [M, N] fp32 zeros, set per shape
void* gChainSums = nullptr;       // [M, N] fp32 scratch, set per shape
fcResult_t chainOwn(const fc::engine::EngineGemm& g, cudaStream_t stream) {
  fc::engine::EngineGemm own = g;
  own.chain = true;
  own.tileN = 128;
  own.signal.counters = nullptr;
  own.D = gChainSums;
  own.source = {};
  own.source.C = gZeroSums;
  own.source.D = g.D;
  own.source.firstRow = 0;
  own.source.blockRows = own.source.pieceRows = int64_t((g.M + 127) / 128 * 128);
  return fc::engine::runScatterChainGemm_bf16_t_128x128c2x1p(own, stream);
}

#define OK(call)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)
#define FC(call)                                                                      \
  do {                                                                                \
    fcResult_t r_ = (call);                                                           \
    if (r_ != fcSuccess) {                                                            \
      fprintf(stderr, "%s:%d: %s: %d %s\n", __FILE__, __LINE__, #call, int(r_), fcGetLastError(nullptr)); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

struct Shape {
  size_t M, N, K;
};

// The tensor-parallel shapes of issue 16 at 2 ranks (M = gathered rows) and 8192^3.
const std::vector<Shape> kShapes = {
    {512, 3072, 4096},  {512, 14336, 4096},  {512, 3584, 5120},  {512, 27648, 5120},  {2048, 3072, 4096},
    {2048, 14336, 4096}, {2048, 3584, 5120}, {2048, 27648, 5120}, {8192, 3072, 4096}, {8192, 14336, 4096},
    {8192, 3584, 5120}, {8192, 27648, 5120}, {8192, 8192, 8192}};

using Run = fcResult_t (*)(const fc::engine::EngineGemm&, cudaStream_t);
struct Candidate {
  const char* name;
  Run run;          // B [N, K]; nullptr: cuBLASLt
  Run runN = nullptr;  // the same with B [K, N] (FC_PROBE_B=kn); nullptr: not built so
};
const Candidate kCandidates[] = {
    {"cublaslt", nullptr},
    {"coop128x256c2x1", fc::engine::runAllGatherGemm_bf16_t_128x256c2x1,
     fc::engine::runAllGatherGemm_bf16_n_128x256c2x1},
    {"pingpong128x128c2x1", fc::engine::runAllGatherGemm_bf16_t_128x128c2x1p,
     fc::engine::runAllGatherGemm_bf16_n_128x128c2x1p},
    {"coop128x192c2x1", fc::engine::runAllGatherGemm_bf16_t_128x192c2x1,
     fc::engine::runAllGatherGemm_bf16_n_128x192c2x1},
    {"pingpong128x96c2x1", fc::engine::runAllGatherGemm_bf16_t_128x96c2x1p,
     fc::engine::runAllGatherGemm_bf16_n_128x96c2x1p},
    {"coop128x224c2x1", fc::engine::runAllGatherGemm_bf16_t_128x224c2x1,
     fc::engine::runAllGatherGemm_bf16_n_128x224c2x1},
    {"coop128x160c2x1", fc::engine::runAllGatherGemm_bf16_t_128x160c2x1,
     fc::engine::runAllGatherGemm_bf16_n_128x160c2x1},
    // the tiles tuning::engineTileN takes (either layout: g.transB)
    {"engine_rule", fc::engine::launchAllGatherGemm, fc::engine::launchAllGatherGemm},
    {"pingpong128x112c2x1", fc::engine::probe::pingpong128x112c2x1},
    {"streamk128x128c2x1", fc::engine::probe::streamK128x128c2x1},
    {"streamk128x256c2x1", fc::engine::probe::streamK128x256c2x1},
    {"coop128x128c2x1", fc::engine::probe::coop128x128c2x1},
    {"stock128x256c2x1", fc::engine::probe::stock128x256c2x1},
    {"coop256x128c2x1", fc::engine::probe::coop256x128c2x1},
    {"scatter128x256c2x1", fc::engine::runScatterGemm_bf16_t_128x256c2x1},
    {"scatter128x128c2x1p", fc::engine::runScatterGemm_bf16_t_128x128c2x1p},
    {"scatter128x128c2x1p_nosignal", scatterNoSignal},
    {"scatter128x128c2x1p_ownadd", scatterOwnAdd},
    {"scatter128x128c2x1p_nopipeline", fc::engine::probe::scatterStatic128x128c2x1p},
    {"chain128x128c2x1p_own", chainOwn},
    // The first CUTLASS column again, last: what a column's place in the round costs.
    {"coop128x256c2x1_again", fc::engine::runAllGatherGemm_bf16_t_128x256c2x1},
    {"pingpong128x128c2x1_again", fc::engine::runAllGatherGemm_bf16_t_128x128c2x1p},
};
constexpr int kIters = 5;

__global__ void fillSmallInts(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    p[i] = __float2bfloat16(float(int(x % 5u) - 2));
  }
}

// B's layout (FC_PROBE_B): [N, K] (fcOpT, the default) or [K, N] (fcOpN).
fcOperation_t probeOp() {
  const char* env = getenv("FC_PROBE_B");
  return env != nullptr && std::string(env) == "kn" ? fcOpN : fcOpT;
}

// What cuBLASLt's heuristic picks for D [M, N] = A [M, K] x op(B) (bf16, fp32 compute,
// the library's column-major view: m = N, n = M): "tile/stages/cluster/splitK/swizzle".
std::string cublasChoice(const Shape& s, fcOperation_t op) {
  cublasLtHandle_t h;
  if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS) return "?";
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, d;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
  // B [N, K] row-major is column-major K x N, used transposed; B [K, N] is N x K, as is.
  const cublasOperation_t opA = op == fcOpT ? opT : opN;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN);
  if (op == fcOpT) cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, s.K, s.N, s.K);
  else cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, s.N, s.K, s.N);
  cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, s.K, s.M, s.K);
  cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, s.N, s.M, s.N);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  const size_t ws = size_t(32) << 20;  // the library's workspace (gemm.cc)
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  std::string out = "?";
  if (cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, d, d, pref, 1, &r, &found) == CUBLAS_STATUS_SUCCESS && found) {
    uint32_t tile = 0, stages = 0, cluster = 0, splitk = 0, swz = 0;
    size_t n;
    cublasLtMatmulAlgoConfigGetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &n);
    cublasLtMatmulAlgoConfigGetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &n);
    cublasLtMatmulAlgoConfigGetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &n);
    cublasLtMatmulAlgoConfigGetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &n);
    cublasLtMatmulAlgoConfigGetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof swz, &n);
    char buf[96];
    snprintf(buf, sizeof buf, "tile%u/stages%u/cluster%u/splitk%u/swizzle%u", tile, stages, cluster, splitk, swz);
    out = buf;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(d);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(h);
  return out;
}

// Whether FC_PROBE_COLUMNS (a comma-separated list; unset: all) names this candidate.
bool columnWanted(const char* name) {
  const char* env = getenv("FC_PROBE_COLUMNS");
  if (env == nullptr || *env == 0) return true;
  const std::string list = std::string(",") + env + ",";
  return list.find(std::string(",") + name + ",") != std::string::npos;
}

// The swizzles to time each CUTLASS candidate at (FC_PROBE_SWIZZLES; default: the rule).
std::vector<int> swizzles() {
  std::vector<int> out;
  const char* env = getenv("FC_PROBE_SWIZZLES");
  for (const char* p = env ? env : "0"; *p;) {
    char* end;
    const long v = strtol(p, &end, 10);
    if (end == p) break;
    out.push_back(int(v));
    p = *end == ',' ? end + 1 : end;
  }
  if (out.empty()) out.push_back(0);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 20;
  std::vector<Shape> shapes;
  for (int i = 2; i < argc; ++i) {
    Shape s{};
    if (sscanf(argv[i], "%zu,%zu,%zu", &s.M, &s.N, &s.K) != 3) return fprintf(stderr, "bad shape %s\n", argv[i]), 2;
    shapes.push_back(s);
  }
  if (shapes.empty()) shapes = kShapes;
  if (rounds < 1) rounds = 1;
  int sms = 0;
  OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  OK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  fc::Gemm cublas;
  FC(cublas.init(false));  // cuBLASLt only (never the decode GEMM)
  uint32_t* counters;
  OK(cudaMalloc(&counters, 2 * sizeof(uint32_t)));
  uint32_t* ticket;  // the scatter kernels' tile ticket: zero, and zero again after each run
  OK(cudaMalloc(&ticket, sizeof(uint32_t)));
  OK(cudaMemset(ticket, 0, sizeof(uint32_t)));

  const fcOperation_t op = probeOp();
  printf("# gemm-configs: %s, %d SMs, bf16, B %s; graph of %d GEMMs, %d interleaved rounds (median)\n",
         prop.name, sms, op == fcOpT ? "[N, K]" : "[K, N]", kIters, rounds);
  // Columns: cuBLASLt, then every CUTLASS candidate at every swizzle asked for.
  struct Column {
    const Candidate* c;
    int swizzle;
    std::string name;
  };
  std::vector<Column> cols;
  const std::vector<int> swz = swizzles();
  for (const Candidate& c : kCandidates) {
    if (c.run && (!columnWanted(c.name) || (op == fcOpN && c.runN == nullptr))) continue;
    for (int w : c.run ? swz : std::vector<int>{0}) {
      std::string name = c.name;
      if (c.run && (swz.size() > 1 || w != 0)) name += "_s" + std::to_string(w);
      cols.push_back({&c, w, name});
    }
  }
  printf("M,N,K");
  for (const Column& c : cols) printf(",%s_us", c.name.c_str());
  printf(",best,best_over_cublaslt,exact,cublaslt_choice\n");
  int failures = 0;
  for (const Shape& s : shapes) {
    __nv_bfloat16 *A, *B;
    OK(cudaMalloc(&A, s.M * s.K * 2));
    OK(cudaMalloc(&B, s.N * s.K * 2));
    fillSmallInts<<<1024, 256, 0, stream>>>(A, s.M * s.K, 1u);
    fillSmallInts<<<1024, 256, 0, stream>>>(B, s.N * s.K, 2u);
    void* zeros;
    OK(cudaMalloc(&zeros, s.M * s.N * 2));
    OK(cudaMemsetAsync(zeros, 0, s.M * s.N * 2, stream));
    gZeroPartial = zeros;
    void *zeroSums, *chainSums;
    OK(cudaMalloc(&zeroSums, s.M * s.N * 4));
    OK(cudaMalloc(&chainSums, s.M * s.N * 4));
    OK(cudaMemsetAsync(zeroSums, 0, s.M * s.N * 4, stream));
    gZeroSums = zeroSums;
    gChainSums = chainSums;
    OK(cudaGetLastError());
    const int n = int(cols.size());
    std::vector<__nv_bfloat16*> D(n);
    std::vector<cudaGraphExec_t> exec(n);
    for (int c = 0; c < n; ++c) {
      OK(cudaMalloc(&D[c], s.M * s.N * 2));
      OK(cudaMemsetAsync(D[c], 0xff, s.M * s.N * 2, stream));  // poison: NaN
      fc::engine::EngineGemm g{A, B, D[c], s.M, s.N, s.K, op, fcBfloat16, {}, sms};
      g.swizzle = cols[c].swizzle;
      g.tileTicket = ticket;
      // The scatter kernels' signals (the others ignore them): two blocks of rows when
      // they are whole tile rows, else one; as in the op, the block computed last is
      // "ours" and counts nothing.
      const bool twoBlocks = s.M % 256 == 0;
      const int64_t blockRows = int64_t(twoBlocks ? s.M / 2 : s.M);
      g.signal = {reinterpret_cast<char*>(counters), sizeof(uint32_t), blockRows, blockRows, twoBlocks ? 1 : 0};
      g.ready.M = int64_t(s.M);
      g.ready.shardRows = g.ready.pieceRows = int64_t(s.M);  // one rank: every row is ours, nothing to wait for
      auto launch = [&] {
        if (cols[c].c->run) FC((op == fcOpT ? cols[c].c->run : cols[c].c->runN)(g, stream));
        else FC(cublas.matmul(A, s.M, B, D[c], s.N, s.K, op, fcBfloat16, stream));
        OK(cudaGetLastError());
      };
      launch();  // one-time setup outside capture, and the result to check
      cudaGraph_t graph;
      OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < kIters; ++i) launch();
      OK(cudaStreamEndCapture(stream, &graph));
      OK(cudaGraphInstantiate(&exec[c], graph, 0));
      OK(cudaGraphDestroy(graph));
    }
    OK(cudaStreamSynchronize(stream));
    // Every candidate against cuBLASLt, bit for bit (`when`: after what).
    std::vector<uint16_t> ref(s.M * s.N), got(ref.size());
    OK(cudaMemcpy(ref.data(), D[0], ref.size() * 2, cudaMemcpyDeviceToHost));
    bool exact = true;
    auto check = [&](const char* when) {
      for (int c = 1; c < n; ++c) {
        OK(cudaMemcpy(got.data(), D[c], got.size() * 2, cudaMemcpyDeviceToHost));
        if (got != ref) {
          exact = false;
          fprintf(stderr, "%zu,%zu,%zu: %s differs from cuBLASLt%s\n", s.M, s.N, s.K, cols[c].name.c_str(), when);
        }
      }
    };
    check("");
    // Interleaved timing.
    cudaEvent_t t0, t1;
    OK(cudaEventCreate(&t0));
    OK(cudaEventCreate(&t1));
    for (int c = 0; c < n; ++c) OK(cudaGraphLaunch(exec[c], stream));  // warm-up
    std::vector<std::vector<float>> ms(n);
    for (int r = 0; r < rounds; ++r) {
      for (int c = 0; c < n; ++c) {
        OK(cudaEventRecord(t0, stream));
        OK(cudaGraphLaunch(exec[c], stream));
        OK(cudaEventRecord(t1, stream));
        OK(cudaEventSynchronize(t1));
        float t;
        OK(cudaEventElapsedTime(&t, t0, t1));
        ms[c].push_back(t);
      }
    }
    std::vector<double> us(n);
    int best = 1;
    for (int c = 0; c < n; ++c) {
      std::sort(ms[c].begin(), ms[c].end());
      us[c] = 1000.0 * ms[c][ms[c].size() / 2] / kIters;
      if (c > 0 && us[c] < us[best]) best = c;
    }
    // Again after the replays, poisoned first (the scatter kernels' ticket must have
    // come back to zero after every one of them).
    uint32_t ticketLeft = 0;
    OK(cudaMemcpy(&ticketLeft, ticket, sizeof ticketLeft, cudaMemcpyDeviceToHost));
    if (ticketLeft != 0) {
      exact = false;
      fprintf(stderr, "%zu,%zu,%zu: the tile ticket is %u after the runs\n", s.M, s.N, s.K, ticketLeft);
    }
    for (int c = 1; c < n; ++c) {
      OK(cudaMemsetAsync(D[c], 0xff, s.M * s.N * 2, stream));
      OK(cudaGraphLaunch(exec[c], stream));
    }
    OK(cudaStreamSynchronize(stream));
    check(" after replays");
    failures += !exact;
    printf("%zu,%zu,%zu", s.M, s.N, s.K);
    for (double u : us) printf(",%.1f", u);
    printf(",%s,%.3f,%s,%s\n", cols[best].name.c_str(), us[best] / us[0], exact ? "yes" : "NO",
           cublasChoice(s, op).c_str());
    fflush(stdout);
    OK(cudaEventDestroy(t0));
    OK(cudaEventDestroy(t1));
    for (int c = 0; c < n; ++c) {
      OK(cudaGraphExecDestroy(exec[c]));
      OK(cudaFree(D[c]));
    }
    OK(cudaFree(A));
    OK(cudaFree(B));
    OK(cudaFree(zeros));
    OK(cudaFree(zeroSums));
    OK(cudaFree(chainSums));
  }
  return failures ? 1 : 0;
}
