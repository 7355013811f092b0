// engine-pair: the GEMM + reduce-scatter engine at 2 ranks with both ranks in ONE
// process on ONE GPU (fcCommInitAll with the device listed twice, FC_SHARE_GPU=1), each
// GEMM's persistent grid capped (FC_ENGINE_SMS=48) so that both are resident at once and
// run side by side in one context. Then the engine can take its epilogue add
// (FC_MMRS_ENGINE_STAGES=epilogue-add: our own tiles wait inside the GEMM for the
// peer's pulled partial and add it in their epilogue), which ranks in separate
// processes sharing a GPU cannot run (their contexts time-slice:
// fused/matmul_reduce_scatter.cc). For a one-GPU machine.
//
// Checks, per shape: both ranks' blocks against an exact reference (integer inputs:
// each rank's partial rounded once to the type, their fp32 sum rounded once), eager
// and after graph replays, outputs poisoned before; then times, per variant (the
// engine (the sum after the GEMM), the engine with the epilogue add in 4, 1 and 2
// pieces, and timing only - wrong results, unchecked - without the gates, and without
// gates and pulls: FC_MMRS_ENGINE_STAGES), a graph of -n calls per rank, both graphs launched together, the
// later to finish / n, median of -r replays, interleaved. The times are of two GEMMs
// sharing one GPU (half its SMs each) and a local exchange: they compare variants,
// not what 2 GPUs take.
//   build/tools/probes/engine-pair [-n 10] [-r 11] [-s SHAPE]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fusedcomm.h"
#include "pair_probe.h"
#include "probe_check.h"

namespace {

using namespace pair_probe;

struct Variant {
  const char *name, *stages, *pieces;  // FC_MMRS_ENGINE_STAGES, FC_MMRS_ENGINE_PIECES
  bool exact;  // computes the right result (else a stage left out, timing only)
  fcComm_t comm[2];
};

struct Rank {
  cudaStream_t stream;
  void *A, *B, *C;
};

// The exact C[i][j] of `rank`'s block (i within it).
float expected(const Shape& s, uint64_t seed, int rank, size_t i, size_t j) {
  const size_t row = size_t(rank) * (s.M / 2) + i;
  float sum = 0.f;
  for (int r = 0; r < 2; ++r) {
    long p = 0;
    for (size_t k = 0; k < s.K; ++k) {
      const size_t b = s.transB == fcOpN ? k * s.N + j : j * s.K + k;
      p += long(pattern(seed, r, row * s.K + k)) * pattern(seed + 1, r, b);
    }
    sum += roundTo(s.t, float(p));
  }
  return roundTo(s.t, sum);
}

// Wrong elements of both ranks' blocks (all of them when small, else 3000 samples).
size_t check(const Shape& s, uint64_t seed, Rank (&ranks)[2]) {
  const size_t ms = s.M / 2, n = ms * s.N;
  const bool all = n * s.K <= (size_t(1) << 26);
  size_t bad = 0;
  for (int r = 0; r < 2; ++r) {
    std::vector<uint16_t> h(n);
    CK(cudaMemcpy(h.data(), ranks[r].C, n * 2, cudaMemcpyDeviceToHost));
    uint64_t x = seed;
    for (size_t e = 0; e < (all ? n : 3000); ++e) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const size_t idx = all ? e : size_t(x >> 17) % n;
      const float want = expected(s, seed, r, idx / s.N, idx % s.N), got = decode(s.t, h[idx]);
      if (!(got == want) && bad++ < 3)
        fprintf(stderr, "  rank %d C[%zu][%zu] = %g, expected %g\n", r, idx / s.N, idx % s.N, got, want);
    }
  }
  return bad;
}

void poison(const Shape& s, Rank (&ranks)[2]) {
  for (Rank& k : ranks) CK(cudaMemset(k.C, 0xff, s.M / 2 * s.N * 2));
  CK(cudaDeviceSynchronize());
}

void call(const Variant& v, const Shape& s, Rank (&ranks)[2]) {
  for (int r = 0; r < 2; ++r)
    FC_CK(fcMatmulReduceScatter(ranks[r].A, ranks[r].B, ranks[r].C, s.M, s.N, s.K, s.transB, s.t, v.comm[r],
                                ranks[r].stream));
}

void capture(const Variant& v, const Shape& s, Rank (&ranks)[2], int calls, cudaGraphExec_t (&exec)[2]) {
  for (int r = 0; r < 2; ++r) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(ranks[r].stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls; ++i)
      FC_CK(fcMatmulReduceScatter(ranks[r].A, ranks[r].B, ranks[r].C, s.M, s.N, s.K, s.transB, s.t, v.comm[r],
                                  ranks[r].stream));
    CK(cudaStreamEndCapture(ranks[r].stream, &g));
    CK(cudaGraphInstantiate(&exec[r], g, 0));
    CK(cudaGraphDestroy(g));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 10, replays = 11, shapeOnly = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "-r")) replays = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "-s")) shapeOnly = atoi(argv[i + 1]);
  }
  setenv("FC_SHARE_GPU", "1", 1);
  // Two grids of 46 CTAs (23 clusters) plus the gates: room to spare on 132 SMs
  // (FC_ENGINE_SMS overrides; 64 = 62-CTA grids still fit beside the gates).
  setenv("FC_ENGINE_SMS", "48", 0);
  setenv("FC_MAX_CTAS", "32", 1);    // the barriers' and sums' grids beside the GEMMs
  setenv("FC_SCRATCH_BYTES", "67108864", 1);  // no scratch growth (a device sync) mid-run
  setenv("FC_TIMEOUT_MS", "20000", 0);
  // (Not the cuBLASLt pipeline: its GEMMs may need every SM at once, which a peer's
  // spinning barrier beside them holds here: a stall no 2-GPU run has.)
  Variant variants[] = {{"engine", "full", "4", true, {}},
                        {"epilogue-add", "epilogue-add", "4", true, {}},
                        {"no-gate", "no-gate", "4", false, {}},
                        {"gemm-only", "gemm-only", "4", false, {}},
                        {"add-pieces-1", "epilogue-add", "1", true, {}},
                        {"add-pieces-2", "epilogue-add", "2", true, {}}};
  const int devs[2] = {0, 0};
  setenv("FC_MMRS_ALGO", "engine", 1);
  for (Variant& v : variants) {
    setenv("FC_MMRS_ENGINE_STAGES", v.stages, 1);
    setenv("FC_MMRS_ENGINE_PIECES", v.pieces, 1);
    FC_CK(fcCommInitAll(v.comm, 2, devs));
  }
  const Shape shapes[] = {{256, 256, 128, fcOpN, fcBfloat16},    {512, 392, 264, fcOpT, fcBfloat16},
                          {1024, 1000, 520, fcOpN, fcFloat16},   {2048, 1536, 1024, fcOpT, fcFloat16},
                          {2048, 4096, 2048, fcOpT, fcBfloat16}, {4096, 4096, 2048, fcOpN, fcBfloat16},
                          {8192, 4096, 1024, fcOpT, fcBfloat16}};
  size_t maxA = 0, maxB = 0, maxC = 0;
  for (const Shape& s : shapes) {
    maxA = std::max(maxA, s.M * s.K * 2);
    maxB = std::max(maxB, s.K * s.N * 2);
    maxC = std::max(maxC, s.M / 2 * s.N * 2);
  }
  Rank ranks[2];
  for (Rank& k : ranks) {
    CK(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    CK(cudaMalloc(&k.A, maxA));
    CK(cudaMalloc(&k.B, maxB));
    CK(cudaMalloc(&k.C, maxC));
  }
  cudaEvent_t start, stop[2];
  CK(cudaEventCreate(&start));
  for (cudaEvent_t& e : stop) CK(cudaEventCreate(&e));
  printf("# engine-pair: fcMatmulReduceScatter, 2 ranks in one process on one GPU (GEMM grids of FC_ENGINE_SMS=%s "
         "less the gates' 2 CTAs each, local exchange); exact checks eager and after 20 graph replays; us per call, "
         "graph of %d calls per rank, median of %d replays, variants interleaved\n",
         getenv("FC_ENGINE_SMS"), iters, replays);
  printf("M,N,K,transB,dtype");
  for (const Variant& v : variants) printf(",%s_us", v.name);
  printf(",check (all but no-gate and gemm-only)\n");
  const size_t nv = sizeof variants / sizeof variants[0];
  size_t failures = 0;
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; ++si) {
    if (shapeOnly >= 0 && int(si) != shapeOnly) continue;
    const Shape& s = shapes[si];
    const uint64_t seed = 1000 + si;
    upload(s, seed, ranks);
    size_t bad = 0;
    std::vector<cudaGraphExec_t> execs(2 * nv);
    for (size_t v = 0; v < nv; ++v) {
      poison(s, ranks);
      call(variants[v], s, ranks);
      CK(cudaDeviceSynchronize());
      size_t b = 0;
      if (variants[v].exact) {
        b = check(s, seed, ranks);
        cudaGraphExec_t one[2];
        capture(variants[v], s, ranks, 1, one);
        poison(s, ranks);
        for (int i = 0; i < 20; ++i) replay(one, ranks, start, stop);
        b += check(s, seed, ranks);
        for (cudaGraphExec_t e : one) CK(cudaGraphExecDestroy(e));
      }
      if (b) fprintf(stderr, "%s: %zu x %zu x %zu: %zu wrong\n", variants[v].name, s.M, s.N, s.K, b);
      bad += b;
      cudaGraphExec_t many[2];
      capture(variants[v], s, ranks, iters, many);
      execs[2 * v] = many[0];
      execs[2 * v + 1] = many[1];
    }
    std::vector<std::vector<float>> ms(nv);
    for (int rep = 0; rep < replays + 2; ++rep)
      for (size_t v = 0; v < nv; ++v) {
        cudaGraphExec_t pair[2] = {execs[2 * v], execs[2 * v + 1]};
        const float t = replay(pair, ranks, start, stop);
        if (rep >= 2) ms[v].push_back(t);
      }
    printf("%zu,%zu,%zu,%s,%s", s.M, s.N, s.K, s.transB == fcOpN ? "n" : "t", s.t == fcBfloat16 ? "bf16" : "fp16");
    for (size_t v = 0; v < nv; ++v) {
      std::sort(ms[v].begin(), ms[v].end());
      printf(",%.1f", 1000.0 * ms[v][ms[v].size() / 2] / iters);
      CK(cudaGraphExecDestroy(execs[2 * v]));
      CK(cudaGraphExecDestroy(execs[2 * v + 1]));
    }
    printf(",%s\n", bad ? "WRONG" : "exact");
    fflush(stdout);
    failures += bad != 0;
  }
  for (Variant& v : variants) {
    for (fcComm_t c : v.comm) {
      fcResult_t async = fcSuccess;
      FC_CK(fcCommGetAsyncError(c, &async));
      if (async != fcSuccess) {
        fprintf(stderr, "%s: asynchronous error: %s\n", v.name, fcGetLastError(nullptr));
        ++failures;
      }
      FC_CK(fcCommDestroy(c));
    }
  }
  if (failures) fprintf(stderr, "engine-pair: %zu failures\n", failures);
  return failures ? 1 : 0;
}
