// fcMatmulReduceScatter (seed 002, with cuBLASLt GEMMs and copy-engine pulls).
//
// Fused, on the caller's stream S and the channel's copy queue Q. Block d is rows
// [d*M/W, (d+1)*M/W) of this rank's partial product A x op(B), in fp32 (the sum over
// ranks is rounded once, at the end). At step t = 1..W-1 every rank computes block
// rank+t (destination order, starting with rank+1 as in seed 002) into its
// workspace slot t % 2; the owner of that block pulls it at step t. Our own block
// comes last, into local memory.
//
//   S: GEMM block rank+1 -> slot 1
//   for t = 1..W-1:
//     S: wait for our pull of step t-1; barrier t (every rank's block of step t is
//        in its slot, and every pull of step t-1 is done, so slot (t+1) % 2 is free
//        everywhere)
//     Q: pull block `rank` from rank-t's slot t % 2 into a local fp32 buffer
//     S: GEMM the next block (rank+t+1 into slot (t+1) % 2, or our own at the end)
//   S: wait for Q; final barrier (nobody reads our slots any more)
//   S: C = round(own + the W-1 pulled partials), fp32 sums
// Each pull runs under the next GEMM; the GEMMs take all SMs, the pulls none.
//
// Unfused (small blocks, or a block larger than a workspace slot): one GEMM of all
// rows in fp32 (into our workspace when it is small: the SM reduce-scatter then
// reads it there), a reduce-scatter of the fp32 partials, one rounding.
#include <algorithm>

#include "collectives/collectives.h"
#include "collectives/copy_engine.h"
#include "core/datatype.h"
#include "core/log.h"
#include "core/result.h"
#include "fused/fused.h"

namespace fc {

fcResult_t launchMatmulReduceScatter(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm,
                                     const MatmulReduceScatterArgs& a, FusedChoice choice, cudaStream_t stream) {
  const int W = dc.nranks, rank = dc.rank;
  const size_t es = dataTypeSize(a.datatype);
  const size_t ms = a.M / size_t(W), blockElems = ms * a.N, partBytes = blockElems * sizeof(float);
  const char* A = static_cast<const char*>(a.A);
  auto rowsOf = [&](int d) { return A + size_t(d) * ms * a.K * es; };
  if (W == 1) return gemm.matmul(A, a.M, a.B, a.C, a.N, a.K, a.transB, a.datatype, stream);

  const bool fits = partBytes <= ce::slotBytes(dc);
  const bool fused = choice == FusedChoice::Fused ? fits
                     : choice == FusedChoice::Unfused ? false
                                                      : fits && overlapPays(ms, a.N);
  FC_TRACE("fcMatmulReduceScatter: M %zu N %zu K %zu: %s", a.M, a.N, a.K, fused ? "fused" : "unfused");
  if (!fused) {
    const size_t partials = a.M * a.N * sizeof(float);
    float* sum = nullptr;
    FC_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&sum), partBytes, stream));
    const bool small = partials < (32u << 20);  // fcReduceScatter's SM / copy-engine crossover
    if (small && partials <= dc.workspaceBytes && blockElems % 4 == 0) {
      // The GEMM writes its fp32 products straight into our workspace and the SM
      // reduce-scatter reads every rank's there (zero-copy: no staging pass; its
      // 16-byte loads need blocks of a multiple of 4 floats). No peer reads our
      // workspace between ops, and the kernel's departure barrier keeps it so.
      const size_t wsOff = dc.workspaceOffset + size_t(channel) * dc.workspaceBytes;
      float* mine = reinterpret_cast<float*>(dc.base + size_t(rank) * dc.stride + wsOff);
      const SymSource src{dc.base, dc.stride, wsOff};
      FC_CHECK(gemm.matmul(A, a.M, a.B, mine, a.N, a.K, a.transB, a.datatype, stream, true));
      FC_CHECK(launchReduceScatter(dc, channel, mine, sum, blockElems, fcFloat32, &src, stream));
    } else {
      float* all = nullptr;
      FC_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&all), partials, stream));
      FC_CHECK(gemm.matmul(A, a.M, a.B, all, a.N, a.K, a.transB, a.datatype, stream, true));
      if (small)
        FC_CHECK(launchReduceScatter(dc, channel, all, sum, blockElems, fcFloat32, nullptr, stream));
      else
        FC_CHECK(launchReduceScatterCe(dc, channel, copies, all, sum, blockElems, fcFloat32, stream));
      FC_CUDA_CHECK(cudaFreeAsync(all, stream));
    }
    FC_CHECK(launchReducePartials(sum, nullptr, blockElems, 0, a.C, blockElems, a.datatype, stream));
    FC_CUDA_CHECK(cudaFreeAsync(sum, stream));
    return fcSuccess;
  }

  float* buf = nullptr;  // the W-1 pulled blocks, then our own
  FC_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&buf), size_t(W) * partBytes, stream));
  const uint32_t sig = opSignature(Op::MatmulReduceScatter, uint32_t(a.datatype), a.M);
  auto slotOf = [&](int r, int t) { return reinterpret_cast<float*>(ce::slot(dc, r, channel, size_t(t))); };
  float* own = buf + size_t(W - 1) * blockElems;
  FC_CHECK(gemm.matmul(rowsOf((rank + 1) % W), ms, a.B, slotOf(rank, 1), a.N, a.K, a.transB, a.datatype, stream,
                       true));
  for (int t = 1; t < W; ++t) {
    if (t >= 2) FC_CHECK(copies.waitMark(stream, size_t(t - 1)));
    FC_CHECK(launchOpBarrier(dc, channel, Op::MatmulReduceScatter, sig, stream));
    FC_CHECK(copies.after(stream, size_t(t)));
    FC_CHECK(ce::copy(buf + size_t(t - 1) * blockElems, slotOf((rank - t + W) % W, t), partBytes, copies.stream()));
    FC_CHECK(copies.mark(size_t(t)));
    if (t + 1 < W)
      FC_CHECK(gemm.matmul(rowsOf((rank + t + 1) % W), ms, a.B, slotOf(rank, t + 1), a.N, a.K, a.transB,
                           a.datatype, stream, true));
    else
      FC_CHECK(gemm.matmul(rowsOf(rank), ms, a.B, own, a.N, a.K, a.transB, a.datatype, stream, true));
  }
  FC_CHECK(copies.waitMark(stream, size_t(W - 1)));
  FC_CHECK(launchOpBarrier(dc, channel, Op::MatmulReduceScatter, sig, stream));
  FC_CHECK(launchReducePartials(own, buf, blockElems, W - 1, a.C, blockElems, a.datatype, stream));
  FC_CUDA_CHECK(cudaFreeAsync(buf, stream));
  return fcSuccess;
}

}  // namespace fc
