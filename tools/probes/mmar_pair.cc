// mmar-pair: fcMatmulAllReduce's engine path at 2 ranks with both ranks in ONE process
// on ONE GPU (fcCommInitAll with the device listed twice, FC_SHARE_GPU=1), each GEMM's
// persistent grid capped (FC_ENGINE_SMS=48) so that both run side by side in one
// context. Then the engine takes its 2-GPU flow, which ranks in separate processes
// sharing a GPU cannot run (their contexts time-slice): the peer's partial added in our
// block's epilogue and our block's sums stored into the peer (design.md, "The engine's
// all-gather"). For a one-GPU machine.
//
// Per shape, C in two caller forms, each checked exactly on both ranks (every row: each
// rank's product rounded once to the type, their fp32 sum rounded once; integer inputs),
// eager and after 20 graph replays, outputs poisoned before:
//   plain      C from cudaMalloc: the peer's sums land in our workspace and are copied
//              into C after the op's final barrier;
//   symmetric  C from fcMemAlloc: the peer stores its block's sums straight into our C
//              (MatmulReduceScatterArgs::gatherC): no copy.
// then their times (a graph of -n calls per rank, both ranks' graphs launched together,
// median of -r replays, interleaved): two GEMMs sharing one GPU and a local exchange, so
// they compare the forms, not what 2 GPUs take.
// Last, the guard of the symmetric form: the ranks pass C at different offsets of their
// fcMemAlloc buffers. Both must report an error (the signature names the offset: a
// mismatch at the entry barrier), and neither may have written into the other's buffer
// at its own C's place (the epilogue stores into the peer only where the entry barrier
// met it cleanly: EpilogueSource::gatherMet): those bytes must still hold the poison.
//   build/tools/probes/mmar-pair [-n 10] [-r 11]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "fusedcomm.h"
#include "pair_probe.h"
#include "probe_check.h"

namespace {

using namespace pair_probe;

struct Rank {
  fcComm_t comm;
  cudaStream_t stream;
  void *A, *B, *plainC;
  void* sym;  // this rank's fcMemAlloc buffer: symmetric C at its start
};

// The exact C[i][j]: both ranks' products rounded once, their sum rounded once.
float expected(const Shape& s, uint64_t seed, size_t i, size_t j) {
  float sum = 0.f;
  for (int r = 0; r < 2; ++r) {
    long p = 0;
    for (size_t k = 0; k < s.K; ++k) {
      const size_t b = s.transB == fcOpN ? k * s.N + j : j * s.K + k;
      p += long(pattern(seed, r, i * s.K + k)) * pattern(seed + 1, r, b);
    }
    sum += roundTo(s.t, float(p));
  }
  return roundTo(s.t, sum);
}

// Wrong elements of C on both ranks (all of them when small, else 4000 samples, half of
// them in each rank's block).
size_t check(const Shape& s, uint64_t seed, void* const (&C)[2]) {
  const size_t n = s.M * s.N;
  const bool all = n * s.K <= (size_t(1) << 26);
  size_t bad = 0;
  for (int r = 0; r < 2; ++r) {
    std::vector<uint16_t> h(n);
    CK(cudaMemcpy(h.data(), C[r], n * 2, cudaMemcpyDeviceToHost));
    uint64_t x = seed + size_t(r);
    for (size_t e = 0; e < (all ? n : 4000); ++e) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const size_t idx = all ? e : (e % 2) * (n / 2) + size_t(x >> 17) % (n / 2);
      const float want = expected(s, seed, idx / s.N, idx % s.N), got = decode(s.t, h[idx]);
      if (!(got == want) && bad++ < 3)
        fprintf(stderr, "  rank %d C[%zu][%zu] = %g, expected %g\n", r, idx / s.N, idx % s.N, got, want);
    }
  }
  return bad;
}

void poison(void* const (&C)[2], size_t bytes) {
  for (void* p : C) CK(cudaMemset(p, 0xff, bytes));
  CK(cudaDeviceSynchronize());
}

void call(const Shape& s, Rank (&ranks)[2], void* const (&C)[2]) {
  for (int r = 0; r < 2; ++r)
    FC_CK(fcMatmulAllReduce(ranks[r].A, ranks[r].B, C[r], s.M, s.N, s.K, s.transB, s.t, ranks[r].comm,
                            ranks[r].stream));
}

void capture(const Shape& s, Rank (&ranks)[2], void* const (&C)[2], int calls, cudaGraphExec_t (&exec)[2]) {
  for (int r = 0; r < 2; ++r) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(ranks[r].stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls; ++i)
      FC_CK(fcMatmulAllReduce(ranks[r].A, ranks[r].B, C[r], s.M, s.N, s.K, s.transB, s.t, ranks[r].comm,
                              ranks[r].stream));
    CK(cudaStreamEndCapture(ranks[r].stream, &g));
    CK(cudaGraphInstantiate(&exec[r], g, 0));
    CK(cudaGraphDestroy(g));
  }
}

// fcMemAlloc is collective: with both ranks in one process, each rank's call from its
// own thread.
void memAllocBoth(Rank (&ranks)[2], size_t bytes) {
  fcResult_t res[2];
  std::thread other([&] { res[1] = fcMemAlloc(ranks[1].comm, &ranks[1].sym, bytes); });
  res[0] = fcMemAlloc(ranks[0].comm, &ranks[0].sym, bytes);
  other.join();
  for (fcResult_t r : res)
    if (r != fcSuccess) {
      fprintf(stderr, "mmar-pair: fcMemAlloc: %s\n", fcGetLastError(nullptr));
      exit(1);
    }
}

bool allPoison(const void* p, size_t bytes) {
  std::vector<unsigned char> h(bytes);
  CK(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost));
  return std::all_of(h.begin(), h.end(), [](unsigned char b) { return b == 0xff; });
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 10, replays = 11;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "-r")) replays = atoi(argv[i + 1]);
  }
  setenv("FC_SHARE_GPU", "1", 1);
  setenv("FC_ENGINE_SMS", "48", 0);  // two GEMM grids side by side on 132 SMs
  setenv("FC_MAX_CTAS", "32", 1);    // the barriers' grids beside the GEMMs
  setenv("FC_SCRATCH_BYTES", "67108864", 1);
  setenv("FC_TIMEOUT_MS", "20000", 0);
  setenv("FC_MMAR_ALGO", "engine", 1);
  const int devs[2] = {0, 0};
  fcComm_t comms[2];
  FC_CK(fcCommInitAll(comms, 2, devs));
  // Blocks of whole 128-row tiles (M / 2), both layouts and dtypes, a column of tiles cut by N.
  const Shape shapes[] = {{1024, 1032, 136, fcOpT, fcBfloat16},
                          {2048, 1536, 1024, fcOpN, fcFloat16},
                          {2048, 4096, 2048, fcOpT, fcBfloat16},
                          {4096, 4096, 2048, fcOpT, fcBfloat16}};
  size_t maxA = 0, maxB = 0, maxC = 0;
  for (const Shape& s : shapes) {
    maxA = std::max(maxA, s.M * s.K * 2);
    maxB = std::max(maxB, s.K * s.N * 2);
    maxC = std::max(maxC, s.M * s.N * 2);
  }
  Rank ranks[2];
  for (int r = 0; r < 2; ++r) {
    Rank& k = ranks[r];
    k.comm = comms[r];
    CK(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    CK(cudaMalloc(&k.A, maxA));
    CK(cudaMalloc(&k.B, maxB));
    CK(cudaMalloc(&k.plainC, maxC));
  }
  memAllocBoth(ranks, maxC);
  cudaEvent_t start, stop[2];
  CK(cudaEventCreate(&start));
  for (cudaEvent_t& e : stop) CK(cudaEventCreate(&e));
  printf("# mmar-pair: fcMatmulAllReduce (FC_MMAR_ALGO=engine), 2 ranks in one process on one GPU (GEMM grids of "
         "FC_ENGINE_SMS=%s, local exchange); exact checks eager and after 20 graph replays; us per call, graph of "
         "%d calls per rank, median of %d replays, forms interleaved\n",
         getenv("FC_ENGINE_SMS"), iters, replays);
  printf("M,N,K,transB,dtype,plain_us,symmetric_us,check\n");
  size_t failures = 0;
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; ++si) {
    const Shape& s = shapes[si];
    const uint64_t seed = 2000 + si;
    const size_t cBytes = s.M * s.N * 2;
    upload(s, seed, ranks);
    void* const forms[2][2] = {{ranks[0].plainC, ranks[1].plainC}, {ranks[0].sym, ranks[1].sym}};
    size_t bad = 0;
    cudaGraphExec_t execs[2][2];
    for (int f = 0; f < 2; ++f) {
      poison(forms[f], cBytes);
      call(s, ranks, forms[f]);
      CK(cudaDeviceSynchronize());
      size_t b = check(s, seed, forms[f]);
      cudaGraphExec_t one[2];
      capture(s, ranks, forms[f], 1, one);
      poison(forms[f], cBytes);
      for (int i = 0; i < 20; ++i) replay(one, ranks, start, stop);
      b += check(s, seed, forms[f]);
      for (cudaGraphExec_t e : one) CK(cudaGraphExecDestroy(e));
      if (b) fprintf(stderr, "%s C: %zu x %zu x %zu: %zu wrong\n", f ? "symmetric" : "plain", s.M, s.N, s.K, b);
      bad += b;
      capture(s, ranks, forms[f], iters, execs[f]);
    }
    std::vector<float> ms[2];
    for (int rep = 0; rep < replays + 2; ++rep)
      for (int f = 0; f < 2; ++f) {
        const float t = replay(execs[f], ranks, start, stop);
        if (rep >= 2) ms[f].push_back(t);
      }
    printf("%zu,%zu,%zu,%s,%s", s.M, s.N, s.K, s.transB == fcOpN ? "n" : "t", s.t == fcBfloat16 ? "bf16" : "fp16");
    for (int f = 0; f < 2; ++f) {
      std::sort(ms[f].begin(), ms[f].end());
      printf(",%.1f", 1000.0 * ms[f][ms[f].size() / 2] / iters);
      for (cudaGraphExec_t e : execs[f]) CK(cudaGraphExecDestroy(e));
    }
    printf(",%s\n", bad ? "WRONG" : "exact");
    fflush(stdout);
    failures += bad != 0;
  }
  for (Rank& k : ranks) {
    fcResult_t async = fcSuccess;
    FC_CK(fcCommGetAsyncError(k.comm, &async));
    if (async != fcSuccess) {
      fprintf(stderr, "mmar-pair: asynchronous error: %s\n", fcGetLastError(nullptr));
      ++failures;
    }
  }

  // The guard: rank 0's C at the start of its buffer, rank 1's 2 MiB further on (the
  // buffers are one allocation granule apart at least: maxC rounded up). Every byte
  // poisoned; after the call, rank 1's buffer at rank 0's offset and rank 0's at rank
  // 1's must be untouched, and both communicators must report the mismatch.
  {
    const Shape s{1024, 1024, 256, fcOpT, fcBfloat16};
    const size_t cBytes = s.M * s.N * 2, offset = size_t(2) << 20, bytes = offset + cBytes;
    Rank pair[2];
    setenv("FC_TIMEOUT_MS", "5000", 1);
    FC_CK(fcCommInitAll(comms, 2, devs));
    for (int r = 0; r < 2; ++r) pair[r] = ranks[r], pair[r].comm = comms[r];
    memAllocBoth(pair, bytes);
    upload(s, 3000, pair);
    for (const Rank& k : pair) CK(cudaMemset(k.sym, 0xff, bytes));
    CK(cudaDeviceSynchronize());
    void* const C[2] = {pair[0].sym, static_cast<char*>(pair[1].sym) + offset};
    for (int r = 0; r < 2; ++r)
      if (fcMatmulAllReduce(pair[r].A, pair[r].B, C[r], s.M, s.N, s.K, s.transB, s.t, pair[r].comm,
                            pair[r].stream) != fcSuccess)
        fprintf(stderr, "  rank %d: the call failed at once: %s\n", r, fcGetLastError(nullptr));
    CK(cudaDeviceSynchronize());
    int reported = 0;
    for (int r = 0; r < 2; ++r) {
      fcResult_t async = fcSuccess;
      FC_CK(fcCommGetAsyncError(pair[r].comm, &async));
      printf("# mismatched C offsets: rank %d reports %d (%s)\n", r, int(async),
             async == fcSuccess ? "no error" : fcGetLastError(nullptr));
      reported += async != fcSuccess;
    }
    const bool untouched0 = allPoison(static_cast<char*>(pair[0].sym) + offset, cBytes),
               untouched1 = allPoison(pair[1].sym, cBytes);
    printf("# mismatched C offsets: %d of 2 ranks report an error; rank 0's buffer at rank 1's C %s, rank 1's at "
           "rank 0's %s\n",
           reported, untouched0 ? "untouched" : "WRITTEN", untouched1 ? "untouched" : "WRITTEN");
    failures += reported != 2 || !untouched0 || !untouched1;
    for (Rank& k : pair) FC_CK(fcCommAbort(k.comm));
  }
  for (Rank& k : ranks) FC_CK(fcCommDestroy(k.comm));
  if (failures) fprintf(stderr, "mmar-pair: %zu failures\n", failures);
  printf("# mmar-pair: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
