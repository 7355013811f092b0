// lamport-pair: the Lamport kernels' own costs, with both ranks of a 2-rank communicator
// on ONE GPU in ONE process (fcCommInitAll with the device listed twice, FC_SHARE_GPU=1),
// so that their kernels run side by side (two streams of one context) and exchange
// through local memory instead of NVLink. Not a latency of the library on 2 GPUs: the
// exchange's round trip is shorter here; what it compares is the variants of one
// kernel against each other (the stages left out, the polls' back-off, a row over a
// cluster), which a one-GPU machine can run when no 2-GPU machine is lent.
//
// Per variant a pair of communicators made with its environment (FC_LAMPORT_STAGES,
// FC_LAMPORT_SPINS, FC_ARNORM_CLUSTER_PACKS, FC_ARNORM_ALGO), per size a CUDA graph of -n calls per rank,
// both graphs launched together (rank 1's stream waits for rank 0's start event), the
// time of the later to finish / n, median of -r replays; variants interleaved. Every
// kernel gets at most 64 CTAs (FC_MAX_CTAS, unless set), so that both ranks' grids fit the GPU at once.
// With -g 2 the ranks are GPUs 0 and 1 instead (NVLink, no CTA cap): the library's
// kernels timed the way tools/probes/push-rate times its minimal Lamport kernel.
//   CUDA_MODULE_LOADING=EAGER build/tools/probes/lamport-pair [-n 20] [-r 21] [-v VARIANT] [-s SHAPE] [-g 1|2]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fusedcomm.h"
#include "probe_check.h"

namespace {

struct Variant {
  const char *name, *var, *value;
  fcComm_t comm[2];
};

struct Rank {
  cudaStream_t stream;
  void *in, *res, *w, *resOut, *out;
};

// One call of rank r: the all-reduce (hidden 0), the reduce-scatter of `count`-element
// blocks (hidden 1), or the all-reduce + RMSNorm.
void call(const Variant& v, Rank& k, int r, size_t tokens, size_t hidden, size_t count) {
  if (hidden == 1)
    FC_CK(fcReduceScatter(k.in, k.out, count, fcBfloat16, fcSum, v.comm[r], k.stream));
  else if (hidden == 0)
    FC_CK(fcAllReduceOneShot(k.in, k.out, count, fcBfloat16, fcSum, v.comm[r], k.stream));
  else
    FC_CK(fcAllReduceResidualRMSNorm(k.in, k.res, k.w, k.resOut, k.out, tokens, hidden, 1e-6f, fcBfloat16, v.comm[r],
                                  k.stream));
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 20, replays = 21;
  const char* only = nullptr;  // -v NAME: that variant alone
  int shapeOnly = -1;          // -s K: the K-th shape alone
  int gpus = 1;                // -g 2: rank r on GPU r
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "-r")) replays = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "-v")) only = argv[i + 1];
    if (!strcmp(argv[i], "-s")) shapeOnly = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "-g")) gpus = atoi(argv[i + 1]);
  }
  if (gpus == 1) {
    setenv("FC_SHARE_GPU", "1", 1);
    // Both ranks' grids must be resident together on the one GPU, or the Lamport waits
    // find a peer CTA that never starts: at most 64 CTAs per kernel, unless FC_MAX_CTAS
    // says otherwise (the one-shot all-reduce's 128 CTAs of <= 544 threads fit twice).
    setenv("FC_MAX_CTAS", "64", 0);
  }
  Variant variants[] = {{"full", "FC_LAMPORT_STAGES", "full", {}},       {"no-save", "FC_LAMPORT_STAGES", "no-save", {}},
                        {"no-call", "FC_LAMPORT_STAGES", "no-call", {}}, {"push-only", "FC_LAMPORT_STAGES", "push-only", {}},
                        {"spins-8", "FC_LAMPORT_SPINS", "8", {}},        {"spins-64", "FC_LAMPORT_SPINS", "64", {}},
                        {"cta-per-row", "FC_ARNORM_CLUSTER_PACKS", "0", {}},
                        {"unfused", "FC_ARNORM_ALGO", "unfused", {}},
                        {"rs-sm", "FC_REDUCE_SCATTER_ALGO", "sm", {}}};
  const int devs[2] = {0, gpus == 2 ? 1 : 0};
  for (Variant& v : variants) {
    setenv(v.var, v.value, 1);
    FC_CK(fcCommInitAll(v.comm, 2, devs));
    unsetenv(v.var);
  }
  const size_t maxBytes = 64u << 20;
  Rank ranks[2];
  for (Rank& k : ranks) {
    CK(cudaSetDevice(devs[&k - ranks]));
    CK(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    for (void** p : {&k.in, &k.res, &k.resOut, &k.out}) CK(cudaMalloc(p, maxBytes));
    CK(cudaMalloc(&k.w, 64 << 10));
    CK(cudaMemset(k.in, 0x3c, maxBytes));  // 1.17 in every bf16: no NaN, no all-ones word
    CK(cudaMemset(k.res, 0x3c, maxBytes));
    CK(cudaMemset(k.w, 0x3c, 64 << 10));
  }
  struct Shape {
    size_t tokens, hidden;  // hidden 0: the all-reduce of `tokens` bytes; 1: the reduce-scatter of blocks of `tokens` bytes
  };
  const Shape shapes[] = {{8 << 10, 0}, {64 << 10, 0}, {256 << 10, 0}, {512 << 10, 0}, {1 << 20, 0}, {2 << 20, 0}, {4 << 20, 0},
                          {1, 4096},    {8, 4096},     {1, 8192},     {16, 8192},   {64, 8192},
                          {256, 8192},  {1024, 8192},  {4096, 8192}, {8 << 10, 1},  {64 << 10, 1},
                          {512 << 10, 1}, {1 << 20, 1}, {2 << 20, 1}, {4 << 20, 1}};
  printf("# lamport-pair: 2 ranks in one process %s (at most %s CTAs per kernel), bf16, graph of %d calls per rank, "
         "median of %d replays, variants interleaved; us per call\n",
         gpus == 2 ? "on GPUs 0 and 1 (NVLink)" : "on one GPU (local exchange, not NVLink)",
         getenv("FC_MAX_CTAS") ? getenv("FC_MAX_CTAS") : "the default", iters, replays);
  printf("op,tokens,hidden,bytes");
  for (const Variant& v : variants) printf(",%s_us", v.name);
  printf("\n");
  // Per rank: a start event (rank 1's recorded once its stream has waited for rank 0's)
  // and a stop event, on the rank's device (events time one device only).
  cudaEvent_t start[2], stop[2];
  for (int r = 0; r < 2; ++r) {
    CK(cudaSetDevice(devs[r]));
    CK(cudaEventCreate(&start[r]));
    CK(cudaEventCreate(&stop[r]));
  }
  for (const Shape& sh : shapes) {
    if (shapeOnly >= 0 && &sh - shapes != shapeOnly) continue;
    const bool norm = sh.hidden > 1, rs = sh.hidden == 1;
    const size_t count = norm ? sh.tokens * sh.hidden : sh.tokens / 2;
    const size_t nv = sizeof variants / sizeof variants[0];
    // Stages other than full and the cluster layout only touch one kernel each.
    std::vector<bool> applies(nv);
    std::vector<cudaGraphExec_t> exec(2 * nv);
    for (size_t v = 0; v < nv; ++v) {
      const std::string var = variants[v].var;
      const bool full = var == "FC_LAMPORT_STAGES" && std::string(variants[v].value) == "full";
      applies[v] = (rs     ? full || var == "FC_REDUCE_SCATTER_ALGO"
                    : norm ? (var != "FC_LAMPORT_STAGES" || full) && var != "FC_REDUCE_SCATTER_ALGO"
                           : var != "FC_ARNORM_CLUSTER_PACKS" && var != "FC_ARNORM_ALGO" &&
                                 var != "FC_REDUCE_SCATTER_ALGO") &&
                   (only == nullptr || !strcmp(only, variants[v].name));
      if (!applies[v]) continue;
      for (int r = 0; r < 2; ++r) {
        CK(cudaSetDevice(devs[r]));
        call(variants[v], ranks[r], r, sh.tokens, sh.hidden, count);  // warm-up
      }
      for (const Rank& k : ranks) CK(cudaStreamSynchronize(k.stream));
      for (int r = 0; r < 2; ++r) {
        CK(cudaSetDevice(devs[r]));
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(ranks[r].stream, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < iters; ++i) call(variants[v], ranks[r], r, sh.tokens, sh.hidden, count);
        CK(cudaStreamEndCapture(ranks[r].stream, &g));
        CK(cudaGraphInstantiate(&exec[2 * v + size_t(r)], g, 0));
        CK(cudaGraphDestroy(g));
      }
    }
    std::vector<std::vector<float>> ms(nv);
    for (int rep = 0; rep < replays + 2; ++rep)
      for (size_t v = 0; v < nv; ++v) {
        if (!applies[v]) continue;
        CK(cudaSetDevice(devs[0]));
        CK(cudaEventRecord(start[0], ranks[0].stream));
        CK(cudaSetDevice(devs[1]));
        CK(cudaStreamWaitEvent(ranks[1].stream, start[0], 0));
        CK(cudaEventRecord(start[1], ranks[1].stream));
        for (int r = 0; r < 2; ++r) {
          CK(cudaSetDevice(devs[r]));
          CK(cudaGraphLaunch(exec[2 * v + size_t(r)], ranks[r].stream));
          CK(cudaEventRecord(stop[r], ranks[r].stream));
        }
        for (const Rank& k : ranks) CK(cudaStreamSynchronize(k.stream));
        float t0, t1;
        CK(cudaEventElapsedTime(&t0, start[0], stop[0]));
        CK(cudaEventElapsedTime(&t1, start[1], stop[1]));
        if (rep >= 2) ms[v].push_back(std::max(t0, t1));  // two warm-up rounds
      }
    printf("%s,%zu,%zu,%zu", norm ? "arnorm" : rs ? "reducescatter" : "allreduce", norm ? sh.tokens : 0,
           norm ? sh.hidden : 0, rs ? 2 * count * 2 : count * 2);
    for (size_t v = 0; v < nv; ++v) {
      if (!applies[v]) {
        printf(",");
        continue;
      }
      std::sort(ms[v].begin(), ms[v].end());
      printf(",%.2f", 1000.0 * ms[v][ms[v].size() / 2] / iters);
      for (int r = 0; r < 2; ++r) CK(cudaGraphExecDestroy(exec[2 * v + size_t(r)]));
    }
    printf("\n");
    fflush(stdout);
  }
  for (Variant& v : variants)
    for (fcComm_t c : v.comm) FC_CK(fcCommDestroy(c));
  return 0;
}
