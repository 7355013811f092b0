// engine-pair: the GEMM + reduce-scatter engine at W ranks (-w, 2 by default, up to 4)
// with every rank in ONE process on ONE GPU (fcCommInitAll with the device listed W
// times, FC_SHARE_GPU=1), each GEMM's persistent grid capped (FC_ENGINE_SMS: 48 at 2
// ranks, 40 at 3, 32 at 4) so that all are resident at once and run side by side in one
// context. Then the engine can take its epilogue add (FC_MMRS_ENGINE_STAGES=epilogue-add:
// at 2 ranks our own tiles wait inside the GEMM for the peer's partial and add it in
// their epilogue; at 3-4 ranks the chain of running sums, every tile from the second
// step on waiting for the next rank's), which ranks in separate processes sharing a GPU
// cannot run (their contexts time-slice: fused/matmul_reduce_scatter.cc). For a one-GPU
// machine.
//
// Checks, per shape: every rank's block against an exact reference (integer inputs:
// each rank's partial rounded once to the type, their fp32 sum rounded once), eager
// and after graph replays, outputs poisoned before (the epilogue add also eagerly with
// every rank's C 2 bytes off 16-byte alignment); then times, per variant (the
// engine (the sum after the GEMM), the engine with the epilogue add in 4, 1 and 2
// pieces, and timing only - wrong results, unchecked - without the gates, and without
// gates and pulls: FC_MMRS_ENGINE_STAGES), a graph of -n calls per rank, all graphs launched together, the
// last to finish / n, median of -r replays, interleaved. The times are of W GEMMs
// sharing one GPU (1/W of its SMs each) and a local exchange: they compare variants,
// not what W GPUs take. Shapes: blocks of 128-4096 rows at 2 ranks; at 3-4 ranks the
// same blocks up to 2048 rows (M = W x block; the chain's fp32 sums of 8192 x 4096 fill
// the default workspace).
//   build/tools/probes/engine-pair [-w 2] [-n 10] [-r 11] [-s SHAPE]
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

constexpr int kMaxRanks = 4;

struct Variant {
  const char *name, *stages, *pieces;  // FC_MMRS_ENGINE_STAGES, FC_MMRS_ENGINE_PIECES
  bool exact;  // computes the right result (else a stage left out, timing only)
  fcComm_t comm[kMaxRanks];
};

struct Rank {
  cudaStream_t stream;
  void *A, *B, *C;
  void* Cbase;  // C's allocation: C is Cbase, or Cbase + 2 bytes (the unaligned-C check)
};

int W = 2;  // ranks (-w)

// The exact C[i][j] of `rank`'s block (i within it): the partials rounded once, summed
// in fp32 (exact: small integers), rounded once.
float expected(const Shape& s, uint64_t seed, int rank, size_t i, size_t j) {
  const size_t row = size_t(rank) * (s.M / W) + i;
  float sum = 0.f;
  for (int r = 0; r < W; ++r) {
    long p = 0;
    for (size_t k = 0; k < s.K; ++k) {
      const size_t b = s.transB == fcOpN ? k * s.N + j : j * s.K + k;
      p += long(pattern(seed, r, row * s.K + k)) * pattern(seed + 1, r, b);
    }
    sum += roundTo(s.t, float(p));
  }
  return roundTo(s.t, sum);
}

// Wrong elements of every rank's block (all of them when small, else 3000 samples).
size_t check(const Shape& s, uint64_t seed, Rank* ranks) {
  const size_t ms = s.M / W, n = ms * s.N;
  const bool all = n * s.K * W <= (size_t(1) << 25);
  size_t bad = 0;
  for (int r = 0; r < W; ++r) {
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

void poison(const Shape& s, Rank* ranks) {
  for (int r = 0; r < W; ++r) CK(cudaMemset(ranks[r].C, 0xff, s.M / W * s.N * 2));
  CK(cudaDeviceSynchronize());
}

void call(const Variant& v, const Shape& s, Rank* ranks) {
  for (int r = 0; r < W; ++r)
    FC_CK(fcMatmulReduceScatter(ranks[r].A, ranks[r].B, ranks[r].C, s.M, s.N, s.K, s.transB, s.t, v.comm[r],
                                ranks[r].stream));
}

void capture(const Variant& v, const Shape& s, Rank* ranks, int calls, cudaGraphExec_t* exec) {
  for (int r = 0; r < W; ++r) {
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
    if (!strcmp(argv[i], "-w")) W = atoi(argv[i + 1]);
  }
  if (W < 2 || W > kMaxRanks) {
    fprintf(stderr, "engine-pair: -w takes 2 to %d ranks\n", kMaxRanks);
    return 2;
  }
  setenv("FC_SHARE_GPU", "1", 1);
  // W grids of (FC_ENGINE_SMS - 2) CTAs plus the gates: room to spare on 132 SMs
  // (FC_ENGINE_SMS overrides; at 2 ranks 64 = 62-CTA grids still fit beside the gates).
  setenv("FC_ENGINE_SMS", W == 2 ? "48" : W == 3 ? "40" : "32", 0);
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
  const int devs[kMaxRanks] = {0, 0, 0, 0};
  setenv("FC_MMRS_ALGO", "engine", 1);
  for (Variant& v : variants) {
    setenv("FC_MMRS_ENGINE_STAGES", v.stages, 1);
    setenv("FC_MMRS_ENGINE_PIECES", v.pieces, 1);
    FC_CK(fcCommInitAll(v.comm, W, devs));
  }
  // As 2-rank shapes (M = 2 blocks); at W ranks M = W blocks of the same rows (at most
  // 2048 from 3 ranks on).
  const Shape shapes2[] = {{256, 256, 128, fcOpN, fcBfloat16},    {512, 392, 264, fcOpT, fcBfloat16},
                           {1024, 1000, 520, fcOpN, fcFloat16},   {2048, 1536, 1024, fcOpT, fcFloat16},
                           {2048, 4096, 2048, fcOpT, fcBfloat16}, {4096, 4096, 2048, fcOpN, fcBfloat16},
                           {8192, 4096, 1024, fcOpT, fcBfloat16}};
  std::vector<Shape> shapes;
  for (Shape s : shapes2) {
    const size_t block = W == 2 ? s.M / 2 : std::min<size_t>(s.M / 2, 2048);
    s.M = block * size_t(W);
    shapes.push_back(s);
  }
  size_t maxA = 0, maxB = 0, maxC = 0;
  for (const Shape& s : shapes) {
    maxA = std::max(maxA, s.M * s.K * 2);
    maxB = std::max(maxB, s.K * s.N * 2);
    maxC = std::max(maxC, s.M / W * s.N * 2);
  }
  Rank ranks[kMaxRanks];
  for (int r = 0; r < W; ++r) {
    Rank& k = ranks[r];
    CK(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    CK(cudaMalloc(&k.A, maxA));
    CK(cudaMalloc(&k.B, maxB));
    CK(cudaMalloc(&k.Cbase, maxC + 16));
    k.C = k.Cbase;
  }
  cudaEvent_t start, stop[kMaxRanks];
  CK(cudaEventCreate(&start));
  for (int r = 0; r < W; ++r) CK(cudaEventCreate(&stop[r]));
  printf("# engine-pair: fcMatmulReduceScatter, %d ranks in one process on one GPU (GEMM grids of FC_ENGINE_SMS=%s "
         "less the gates' 2 CTAs each, local exchange; epilogue-add: %s); exact checks eager and after 20 graph "
         "replays; us per call, graph of %d calls per rank, median of %d replays, variants interleaved\n",
         W, getenv("FC_ENGINE_SMS"),
         W == 2 ? "the peer's partial added by our block's tiles" : "the chain of running sums",
         iters, replays);
  printf("M,N,K,transB,dtype");
  for (const Variant& v : variants) printf(",%s_us", v.name);
  printf(",check (all but no-gate and gemm-only)\n");
  const size_t nv = sizeof variants / sizeof variants[0];
  size_t failures = 0;
  for (size_t si = 0; si < shapes.size(); ++si) {
    if (shapeOnly >= 0 && int(si) != shapeOnly) continue;
    const Shape& s = shapes[si];
    const uint64_t seed = 1000 + si;
    upload(s, seed, ranks, W);
    size_t bad = 0;
    std::vector<cudaGraphExec_t> execs(kMaxRanks * nv);
    for (size_t v = 0; v < nv; ++v) {
      poison(s, ranks);
      call(variants[v], s, ranks);
      CK(cudaDeviceSynchronize());
      size_t b = 0;
      if (variants[v].exact) {
        b = check(s, seed, ranks);
        cudaGraphExec_t one[kMaxRanks];
        capture(variants[v], s, ranks, 1, one);
        poison(s, ranks);
        for (int i = 0; i < 20; ++i) replay(one, ranks, W, start, stop);
        b += check(s, seed, ranks);
        for (int r = 0; r < W; ++r) CK(cudaGraphExecDestroy(one[r]));
      }
      // The epilogue add with every rank's C one element off 16-byte alignment: at 2 ranks
      // that rank sums after the GEMM instead, at 3-4 the chain rounds our block's fp32
      // sums into C after the GEMM (no TMA store into it). Eager, once.
      if (v == 1) {
        for (int r = 0; r < W; ++r) ranks[r].C = static_cast<char*>(ranks[r].Cbase) + 2;
        poison(s, ranks);
        call(variants[v], s, ranks);
        CK(cudaDeviceSynchronize());
        const size_t u = check(s, seed, ranks);
        if (u)
          fprintf(stderr, "%s, C not 16-byte aligned: %zu x %zu x %zu: %zu wrong\n", variants[v].name, s.M, s.N, s.K,
                  u);
        b += u;
        for (int r = 0; r < W; ++r) ranks[r].C = ranks[r].Cbase;
      }
      if (b) fprintf(stderr, "%s: %zu x %zu x %zu: %zu wrong\n", variants[v].name, s.M, s.N, s.K, b);
      bad += b;
      capture(variants[v], s, ranks, iters, &execs[kMaxRanks * v]);
    }
    std::vector<std::vector<float>> ms(nv);
    for (int rep = 0; rep < replays + 2; ++rep)
      for (size_t v = 0; v < nv; ++v) {
        const float t = replay(&execs[kMaxRanks * v], ranks, W, start, stop);
        if (rep >= 2) ms[v].push_back(t);
      }
    printf("%zu,%zu,%zu,%s,%s", s.M, s.N, s.K, s.transB == fcOpN ? "n" : "t", s.t == fcBfloat16 ? "bf16" : "fp16");
    for (size_t v = 0; v < nv; ++v) {
      std::sort(ms[v].begin(), ms[v].end());
      printf(",%.1f", 1000.0 * ms[v][ms[v].size() / 2] / iters);
      for (int r = 0; r < W; ++r) CK(cudaGraphExecDestroy(execs[kMaxRanks * v + r]));
    }
    printf(",%s\n", bad ? "WRONG" : "exact");
    fflush(stdout);
    failures += bad != 0;
  }
  for (Variant& v : variants) {
    for (int r = 0; r < W; ++r) {
      fcComm_t c = v.comm[r];
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
