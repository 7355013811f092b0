// pdl-edge: when does a kernel launched with PDL behind another start sooner for it, in a
// CUDA graph? fcMatmulAllReduce's collective behind its cuBLASLt GEMM did not (it ran as
// late as without PDL) until it also depended on what preceded the op, as the same kernels
// issued as two calls do (docs/design.md, "The collective's PDL edge behind cuBLASLt").
// This probe isolates that, apart from the library's protocols, on one GPU:
//
//   prev (a short kernel, models the previous op's last kernel; it lets its dependents
//   launch at once) -> producer -> consumer (griddepcontrol.wait, then reads the
//   producer's output: models the collective)
//
// Producers: the library's cuBLASLt GEMM (fc::Gemm, as the ops call it) at decode shapes,
// its decode GEMM (CUTLASS, which lets its dependents launch at its last tiles), and a
// plain kernel that spins on every SM, letting its dependents launch at its start or
// not at all. For each, four graphs of 20 such iterations, replayed interleaved: the
// consumer with or without PDL, with or without a second dependency on prev (an event
// recorded before the producer, waited on before the consumer: commDependOnStart's edge).
// Prints the time per iteration (median of the replays) and each graph's programmatic
// edges into the consumer. Run on the GPU machine: build/tools/probes/pdl-edge
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gemm/gemm.h"
#include "probe_check.h"

namespace {

constexpr int kIters = 20, kReplays = 30, kWarmup = 5;

__device__ void spinFor(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

// The previous op's last kernel: its dependents may launch at once (as the Lamport
// kernels allow after their pushes).
__global__ void prevKernel(unsigned long long ns) {
  asm volatile("griddepcontrol.launch_dependents;");
  spinFor(ns);
}

// A producer of our own on every SM, letting its dependents launch at its start or not.
__global__ void spinProducer(unsigned long long ns, int triggerEarly) {
  if (triggerEarly) asm volatile("griddepcontrol.launch_dependents;");
  spinFor(ns);
}

// The collective's stand-in: waits for the producer's grid, then copies its output.
__global__ void consumer(const __nv_bfloat16* in, __nv_bfloat16* out, size_t n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

struct Producer {
  std::string name;
  std::function<void(cudaStream_t)> launch;
  size_t outElems;
};

struct Form {
  bool pdl, edge;
};

// The programmatic edges into the graph's last node (the last iteration's consumer).
int programmaticEdgesIntoLast(cudaGraph_t g) {
  size_t nodes = 0, edges = 0;
  CK(cudaGraphGetNodes(g, nullptr, &nodes));
  std::vector<cudaGraphNode_t> node(nodes);
  CK(cudaGraphGetNodes(g, node.data(), &nodes));
  CK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &edges));
  std::vector<cudaGraphNode_t> from(edges), to(edges);
  std::vector<cudaGraphEdgeData> data(edges);
  CK(cudaGraphGetEdges(g, from.data(), to.data(), data.data(), &edges));
  // The node with no outgoing edge that was captured last: the last consumer.
  cudaGraphNode_t last = nullptr;
  for (cudaGraphNode_t n : node)
    if (std::find(from.begin(), from.end(), n) == from.end()) last = n;
  int count = 0;
  for (size_t e = 0; e < edges; ++e)
    count += to[e] == last && data[e].type == cudaGraphDependencyTypeProgrammatic;
  return count;
}

}  // namespace

int main() {
  requireGpu();
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t started;
  CK(cudaEventCreateWithFlags(&started, cudaEventDisableTiming));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  // Operands of the largest GEMMs (256 x 4096 x 2048, 16 x 4096 x 7168), zeros: the
  // values do not matter here.
  const size_t maxM = 256, N = 4096, maxK = 7168;
  void *a, *b, *d, *out;
  CK(cudaMalloc(&a, maxM * maxK * 2));
  CK(cudaMalloc(&b, N * maxK * 2));
  CK(cudaMalloc(&d, maxM * N * 2));
  CK(cudaMalloc(&out, maxM * N * 2));
  CK(cudaMemset(a, 0, maxM * maxK * 2));
  CK(cudaMemset(b, 0, N * maxK * 2));
  // The library's GEMMs: with its decode GEMM where the tuning table takes the shape
  // (16 x 4096 x 7168: CUTLASS, which lets dependents launch at its last tiles), and
  // cuBLASLt's alone.
  fc::Gemm gemm, gemmLt;
  if (gemm.init() != fcSuccess || gemmLt.init(false) != fcSuccess) {
    std::fprintf(stderr, "pdl-edge: GEMM init: %s\n", fcGetLastError(nullptr));
    return 1;
  }
  std::vector<Producer> producers;
  struct GemmCase {
    const char* name;
    fc::Gemm* g;
    size_t M, K;
  };
  for (const GemmCase& gc : {GemmCase{"cuBLASLt GEMM", &gemmLt, 16, 2048}, GemmCase{"cuBLASLt GEMM", &gemmLt, 256, 2048},
                             GemmCase{"cuBLASLt GEMM", &gemmLt, 16, 7168}, GemmCase{"decode GEMM", &gemm, 16, 7168}})
    producers.push_back({std::string(gc.name) + " " + std::to_string(gc.M) + " x 4096 x " + std::to_string(gc.K),
                         [&, gc](cudaStream_t st) {
                           if (gc.g->matmul(a, gc.M, b, d, N, gc.K, fcOpT, fcBfloat16, st) != fcSuccess) {
                             std::fprintf(stderr, "pdl-edge: GEMM: %s\n", fcGetLastError(nullptr));
                             std::exit(1);
                           }
                         },
                         gc.M * N});
  for (int early : {1, 0})
    producers.push_back({std::string("spin kernel, 5 us, ") +
                             (early ? "lets dependents launch at its start" : "never lets them"),
                         [&, early](cudaStream_t st) { spinProducer<<<sms, 128, 0, st>>>(5000, early); }, 16 * N});

  const Form forms[] = {{true, false}, {true, true}, {false, false}, {false, true}};
  std::printf("pdl-edge: %d iterations a graph (prev 2 us -> producer -> consumer), median of %d replays, "
              "interleaved\n", kIters, kReplays);
  for (const Producer& p : producers) {
    std::vector<cudaGraphExec_t> exec;
    std::vector<int> edgesIn;
    for (const Form& f : forms) {
      auto iteration = [&] {
        prevKernel<<<64, 160, 0, s>>>(2000);
        CK(cudaGetLastError());
        if (f.edge) CK(cudaEventRecord(started, s));
        p.launch(s);
        CK(cudaGetLastError());
        if (f.edge) CK(cudaStreamWaitEvent(s, started, 0));
        cudaLaunchAttribute attr;
        cudaLaunchConfig_t cfg = pdlLaunchConfig(dim3(64), dim3(160), s, &attr);
        if (!f.pdl) cfg.numAttrs = 0;
        CK(cudaLaunchKernelEx(&cfg, consumer, static_cast<const __nv_bfloat16*>(d), static_cast<__nv_bfloat16*>(out),
                              p.outElems));
      };
      iteration();  // outside capture first (cuBLASLt's one-time work)
      CK(cudaStreamSynchronize(s));
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < kIters; ++i) iteration();
      CK(cudaStreamEndCapture(s, &g));
      edgesIn.push_back(programmaticEdgesIntoLast(g));
      exec.emplace_back();
      CK(cudaGraphInstantiate(&exec.back(), g, 0));
      CK(cudaGraphDestroy(g));
    }
    std::vector<std::vector<float>> ms(exec.size());
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    for (int r = -kWarmup; r < kReplays; ++r)
      for (size_t k = 0; k < exec.size(); ++k) {
        CK(cudaEventRecord(t0, s));
        CK(cudaGraphLaunch(exec[k], s));
        CK(cudaEventRecord(t1, s));
        CK(cudaEventSynchronize(t1));
        float x = 0;
        CK(cudaEventElapsedTime(&x, t0, t1));
        if (r >= 0) ms[k].push_back(x);
      }
    std::printf("%s:\n", p.name.c_str());
    for (size_t k = 0; k < exec.size(); ++k) {
      std::sort(ms[k].begin(), ms[k].end());
      std::printf("  consumer %-12s %-27s %7.2f us an iteration (programmatic edges into it: %d)\n",
                  forms[k].pdl ? "with PDL," : "without PDL,",
                  forms[k].edge ? "also depending on prev:" : "behind the producer only:",
                  1000.0 * ms[k][ms[k].size() / 2] / kIters, edgesIn[k]);
      CK(cudaGraphExecDestroy(exec[k]));
    }
    CK(cudaEventDestroy(t0));
    CK(cudaEventDestroy(t1));
  }
  return 0;
}
