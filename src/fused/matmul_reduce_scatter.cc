// fcMatmulReduceScatter (seed 002's destination-ordered GEMMs; cuBLASLt GEMMs whose
// epilogues do the communication).
//
// Block d is rows [d*M/W, (d+1)*M/W) of a rank's A x op(B). Every path sums the W
// partial products of a block in fp32 and rounds once, at the end.
//
// Ring (fused, large blocks). At step t = 0..W-1 rank r computes block d = r+1+t
// (destination order: rank+1 first and its own block last, as in seed 002) and adds
// the partial sum of block d that rank r+1 computed at step t-1 (cuBLASLt's
// epilogue: D = A x op(B) + C, beta = 1). It writes that D, in fp32, straight into
// rank r-1's workspace slot t % 2 through the peer mapping. The sum of block d so
// travels d-1, d-2, ..., d+1 and ends at d, complete, at the last step. The
// epilogue's stores are the transfer: no copy engine, no staging, no reduction pass.
//
//   S: barrier (nobody still uses its workspace for an earlier op: peers may write)
//   for t = 0..W-2:
//     S: GEMM block r+1+t (+ our slot (t-1) % 2 when t > 0) -> rank r-1's slot t % 2
//     S: barrier t: every rank's step-t D has landed, and every rank's step-t read
//        of slot (t-1) % 2 is done, so step t+1 may overwrite it
//   S: GEMM our block + our slot (W-2) % 2 -> C (bf16 straight from the epilogue
//      when cuBLASLt takes an fp32 C with a bf16 D; else fp32 in place, then rounded)
// No final barrier: nobody reads our memory, and every write into a peer's slot
// precedes barrier W-2. The next op's entry barrier protects our last read.
//
// Scatter (unfused, when all W blocks fit one workspace): one batched GEMM (batch d
// = block d, B shared) writes block d, in fp32, into rank d's workspace at
// [rank * block]: the symmetric heap puts every rank's copy at a fixed stride, which
// is the batch stride of D. Then a barrier, and each rank sums the W blocks in its
// own workspace and rounds. One GEMM at full size (no per-block wave quantisation);
// the price is the local sum, which nothing hides.
//
// Staged (nothing fits the workspace): one fp32 GEMM into a temporary buffer,
// fcReduceScatter's algorithm on the fp32 partials, rounding.
#include <algorithm>

#include "collectives/collectives.h"
#include "collectives/copy_engine.h"
#include "core/datatype.h"
#include "core/log.h"
#include "core/result.h"
#include "fused/fused.h"

namespace fc {
namespace {

enum class Path { Ring, Scatter, Staged };

const char* pathName(Path p) { return p == Path::Ring ? "ring" : p == Path::Scatter ? "scatter" : "staged"; }

fcResult_t staged(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm, const MatmulReduceScatterArgs& a,
                  cudaStream_t stream) {
  const size_t blockElems = a.M / size_t(dc.nranks) * a.N, partials = a.M * a.N * sizeof(float);
  float *all = nullptr, *sum = nullptr;
  FC_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&all), partials, stream));
  FC_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&sum), blockElems * sizeof(float), stream));
  FC_CHECK(gemm.matmul(a.A, a.M, a.B, all, a.N, a.K, a.transB, a.datatype, stream, true));
  if (partials < (32u << 20))  // fcReduceScatter's SM / copy-engine crossover (docs/perf.md)
    FC_CHECK(launchReduceScatter(dc, channel, all, sum, blockElems, fcFloat32, nullptr, stream));
  else
    FC_CHECK(launchReduceScatterCe(dc, channel, copies, all, sum, blockElems, fcFloat32, stream));
  FC_CHECK(launchReducePartials(sum, nullptr, blockElems, 0, a.C, blockElems, a.datatype, stream));
  FC_CUDA_CHECK(cudaFreeAsync(all, stream));
  FC_CUDA_CHECK(cudaFreeAsync(sum, stream));
  return fcSuccess;
}

}  // namespace

fcResult_t launchMatmulReduceScatter(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm,
                                     const MatmulReduceScatterArgs& a, FusedChoice choice, cudaStream_t stream) {
  const int W = dc.nranks, rank = dc.rank;
  const size_t es = dataTypeSize(a.datatype);
  const size_t ms = a.M / size_t(W), blockElems = ms * a.N, partBytes = blockElems * sizeof(float);
  if (W == 1) return gemm.matmul(a.A, a.M, a.B, a.C, a.N, a.K, a.transB, a.datatype, stream);

  const bool ringFits = partBytes <= ce::slotBytes(dc);
  const bool scatterFits = size_t(W) * partBytes <= dc.workspaceBytes;
  const Path fallback = scatterFits ? Path::Scatter : Path::Staged;
  const Path path = choice == FusedChoice::Fused     ? (ringFits ? Path::Ring : fallback)
                    : choice == FusedChoice::Unfused ? fallback
                    : ringFits && overlapPays(ms, a.N) ? Path::Ring
                                                       : fallback;
  FC_TRACE("fcMatmulReduceScatter: M %zu N %zu K %zu: %s", a.M, a.N, a.K, pathName(path));
  if (path == Path::Staged) return staged(dc, channel, copies, gemm, a, stream);

  const uint32_t sig = opSignature(Op::MatmulReduceScatter, uint32_t(a.datatype), a.M);
  auto rowsOf = [&](int d) { return static_cast<const char*>(a.A) + size_t(d) * ms * a.K * es; };
  auto slotOf = [&](int r, int t) { return reinterpret_cast<float*>(ce::slot(dc, (r + W) % W, channel, size_t(t))); };
  // Entry: peers are about to write into our workspace.
  FC_CHECK(launchOpBarrier(dc, channel, Op::MatmulReduceScatter, sig, stream));

  if (path == Path::Scatter) {
    MatmulOp op{a.A, ms, a.B, a.N, a.K, a.transB, a.datatype, slotOf(0, 0) + size_t(rank) * blockElems};
    op.dFp32 = true;
    op.batch = W;
    op.strideA = ms * a.K;
    op.strideD = dc.stride / sizeof(float);  // rank d's workspace: base + d * stride
    FC_CHECK(gemm.matmul(op, stream));
    FC_CHECK(launchOpBarrier(dc, channel, Op::MatmulReduceScatter, sig, stream));
    const float* mine = slotOf(rank, 0);
    return launchReducePartials(mine, mine + blockElems, blockElems, W - 1, a.C, blockElems, a.datatype, stream);
  }

  for (int t = 0; t + 1 < W; ++t) {
    MatmulOp op{rowsOf((rank + 1 + t) % W), ms, a.B, a.N, a.K, a.transB, a.datatype, slotOf(rank - 1, t)};
    op.dFp32 = true;
    op.C = t > 0 ? slotOf(rank, t - 1) : nullptr;
    FC_CHECK(gemm.matmul(op, stream));
    FC_CHECK(launchOpBarrier(dc, channel, Op::MatmulReduceScatter, sig, stream));
  }
  float* sum = slotOf(rank, W - 2);
  MatmulOp last{rowsOf(rank), ms, a.B, a.N, a.K, a.transB, a.datatype, a.C};
  last.C = sum;
  if (gemm.supports(last)) return gemm.matmul(last, stream);
  last.D = sum;  // fp32, in place
  last.dFp32 = true;
  FC_CHECK(gemm.matmul(last, stream));
  return launchReducePartials(sum, nullptr, blockElems, 0, a.C, blockElems, a.datatype, stream);
}

}  // namespace fc
