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
// Output: CSV, one line per shape, times in us per GEMM (graph of 5 GEMMs).
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
fcResult_t runAllGatherGemm_bf16_t_128x128c2x1(const EngineGemm&, cudaStream_t);
}  // namespace fc::engine

namespace {

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
  Run run;  // nullptr: cuBLASLt
};
const Candidate kCandidates[] = {
    {"cublaslt", nullptr},
    {"coop128x256c2x1", fc::engine::runAllGatherGemm_bf16_t_128x256c2x1},
    {"coop128x128c2x1", fc::engine::runAllGatherGemm_bf16_t_128x128c2x1},
    {"stock128x256c2x1", fc::engine::probe::stock128x256c2x1},
    {"pingpong128x128c2x1", fc::engine::probe::pingpong128x128c2x1},
    {"coop256x128c1x2", fc::engine::probe::coop256x128c1x2},
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
  FC(cublas.init());

  printf("# gemm-configs: %s, %d SMs, bf16, B [N, K]; graph of %d GEMMs, %d interleaved rounds (median)\n",
         prop.name, sms, kIters, rounds);
  printf("M,N,K");
  for (const Candidate& c : kCandidates) printf(",%s_us", c.name);
  printf(",best,best_over_cublaslt,exact\n");
  int failures = 0;
  for (const Shape& s : shapes) {
    __nv_bfloat16 *A, *B;
    OK(cudaMalloc(&A, s.M * s.K * 2));
    OK(cudaMalloc(&B, s.N * s.K * 2));
    fillSmallInts<<<1024, 256, 0, stream>>>(A, s.M * s.K, 1u);
    fillSmallInts<<<1024, 256, 0, stream>>>(B, s.N * s.K, 2u);
    OK(cudaGetLastError());
    const int n = int(std::size(kCandidates));
    std::vector<__nv_bfloat16*> D(n);
    std::vector<cudaGraphExec_t> exec(n);
    for (int c = 0; c < n; ++c) {
      OK(cudaMalloc(&D[c], s.M * s.N * 2));
      OK(cudaMemsetAsync(D[c], 0xff, s.M * s.N * 2, stream));  // poison: NaN
      fc::engine::EngineGemm g{A, B, D[c], s.M, s.N, s.K, fcOpT, fcBfloat16, {}, sms};
      g.ready.M = int64_t(s.M);
      g.ready.shardRows = int64_t(s.M);  // one rank: every row is ours, nothing to wait for
      auto launch = [&] {
        if (kCandidates[c].run) FC(kCandidates[c].run(g, stream));
        else FC(cublas.matmul(A, s.M, B, D[c], s.N, s.K, fcOpT, fcBfloat16, stream));
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
    // Every candidate against cuBLASLt, bit for bit.
    std::vector<uint16_t> ref(s.M * s.N), got(ref.size());
    OK(cudaMemcpy(ref.data(), D[0], ref.size() * 2, cudaMemcpyDeviceToHost));
    bool exact = true;
    for (int c = 1; c < n; ++c) {
      OK(cudaMemcpy(got.data(), D[c], got.size() * 2, cudaMemcpyDeviceToHost));
      if (got != ref) {
        exact = false;
        fprintf(stderr, "%zu,%zu,%zu: %s differs from cuBLASLt\n", s.M, s.N, s.K, kCandidates[c].name);
      }
    }
    failures += !exact;
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
    printf("%zu,%zu,%zu", s.M, s.N, s.K);
    for (double u : us) printf(",%.1f", u);
    printf(",%s,%.3f,%s\n", kCandidates[best].name, us[best] / us[0], exact ? "yes" : "NO");
    fflush(stdout);
    OK(cudaEventDestroy(t0));
    OK(cudaEventDestroy(t1));
    for (int c = 0; c < n; ++c) {
      OK(cudaGraphExecDestroy(exec[c]));
      OK(cudaFree(D[c]));
    }
    OK(cudaFree(A));
    OK(cudaFree(B));
  }
  return failures ? 1 : 0;
}
