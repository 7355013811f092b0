// All-reduce + residual + RMSNorm above the one-kernel limit, at up to 4 ranks: a
// two-shot in one kernel on the Rows kind's push buffers (collectives/lamport.cuh), so
// that the norm rides on the all-reduce's data as it arrives instead of a second
// kernel's pass over memory (TensorRT-LLM's fused two-shot splits the tokens among
// the ranks the same way; our own protocol). Rows are split into passes of up to
// passRows rows; in each pass rank s owns a block of ceil(rows / W) of them.
//   1. Every rank pushes each peer's block of its input into its slot of that peer's
//      set (the first half of the slot: reduce-scatter).
//   2. Rank s polls for its block's rows from every peer, sums them with its own in
//      rank order, rounds the sum once to the datatype and pushes it into its slot of
//      every peer's set (the second half: all-gather); adds the residual, stores
//      residualOut and the normed row.
//   3. Every rank polls for each peer's block of rounded sums and does the same.
// Every rank computes the residual and the norm of every row from the same rounded
// sum, so all ranks store the same bits, and each rank adds its own residual, as the
// unfused path (all-reduce, then the local norm) does: the sum is rounded before the
// residual is added (two roundings; the one-shot kernel rounds once).
//
// Reuse. Row r of a pass's block is CTA r % grid's on every rank, in both halves and
// every pass, so a CTA only ever exchanges with the same CTA of its peers, as in the
// chunked kinds: pass p uses buffer (buf + p) % 3, and a peer's CTA b that writes
// pass p + 1 into our buffer (p + 1) % 3 = (p - 2) % 3 has received our CTA b's pass
// p data, which we pushed after our CTA b had read (and cleared) pass p - 2. Every CTA
// has rows in every pass but the last, so the peer's next kernel, which starts after
// its whole grid received our last pass, finds our every CTA past pass P - 3, whose
// buffer is its first. The clears of a pass are fenced before the next pass's pushes.
// The Rows state (the rank's buffer index) moves on by the number of passes.
#include "collectives/chunks.cuh"
#include "collectives/collectives.h"
#include "collectives/dispatch.cuh"
#include "collectives/lamport.cuh"
#include "collectives/launch.h"
#include "collectives/norm_rows.cuh"
#include "core/datatype.h"
#include "core/preload.h"
#include "core/result.h"

namespace fc {
namespace {

using dev::Pack;
using Run = dev::LamportRun<dev::LamportKind::Rows>;

template <typename T, int NR>
__global__ void __launch_bounds__(dev::kLamportMaxThreads)
    allReduceNormTwoShotKernel(DeviceComm dc, int channel, NormCall c, size_t passRows, uint32_t sig) {
  constexpr int E = dev::PackTraits<T>::kElems;
  __shared__ float red[2][32];
  const int W = NR > 0 ? NR : dc.nranks;
  const int rank = dc.rank;
  const size_t rowPacks = c.hidden / E;
  const unsigned threads = dev::lamportDataThreads();
  const Pack* in = static_cast<const Pack*>(c.in);
  const size_t passes = (c.tokens + passRows - 1) / passRows;
  dev::waitForPreviousGrid();  // programmatic dependent launch, as the one-shot's
  Run run(dc, channel);
  dev::LamportCall call(dc, channel, sig, c.tokens * c.hidden);
  const float invScale = c.scale ? 1.f / *c.scale : 1.f;
  const size_t halfPacks = run.slotBytes / 2 / sizeof(Pack);  // the all-gather half's offset

  // Every thread has read the buffer index before this CTA's arrival lets the last
  // CTA move it on (by the number of passes).
  __syncthreads();
  if (call.isCallWarp()) {
    const bool arriving = threadIdx.x - threads == unsigned(dev::kCallWarpThreads - 1);
    const uint32_t before = arriving ? run.arrive() : 0u;
    if (blockIdx.x == 0) call.run(Op::AllReduceNorm, channel);  // a mismatch is recorded
    if (arriving) run.advanceIfLast(before, uint32_t(passes));
    return;
  }
  const uint32_t start = run.buf;
  bool failed = false;
  int parity = 0;
  auto total = [&](float ss, bool&) { return norm::rowSum(ss, red, parity, threads); };
  for (size_t p = 0; p < passes; ++p) {
    run.buf = uint32_t((start + p) % 3);
    const size_t first = p * passRows, n = c.tokens - first < passRows ? c.tokens - first : passRows;
    const size_t per = (n + size_t(W) - 1) / size_t(W);  // rows of a rank's block
    auto blockBegin = [&](int s) { return size_t(s) * per < n ? size_t(s) * per : n; };
    auto blockRows = [&](int s) {
      const size_t b = blockBegin(s);
      return (b + per < n ? b + per : n) - b;
    };
    // This pass's pushes may let a peer write what the pass before last cleared.
    if (p > 0) __threadfence();

    // 1. Each peer's block of our input into our slot of its set (first half).
    for (int j = 1; j < W; ++j) {
      const int s = (rank + j) % W;
      Pack* to = run.slot(s, run.buf, 0, rank);
      for (size_t r = blockIdx.x; r < blockRows(s); r += gridDim.x) {
        const Pack* from = in + (first + blockBegin(s) + r) * rowPacks;
        for (size_t q = threadIdx.x; q < rowPacks; q += threads) to[r * rowPacks + q] = dev::notEmpty(from[q]);
      }
    }
    // The next kernel may start launching; it waits for this one before it reads.
    if (p == 0) dev::allowDependentLaunch();

    // 2. Our block: every rank's rows summed in rank order, rounded once, pushed to
    //    every peer's second half (the same bits everywhere), then residual + norm.
    for (size_t r = blockIdx.x; r < blockRows(rank); r += gridDim.x, parity ^= 1) {
      const size_t row = first + blockBegin(rank) + r;
      auto sum = [&](size_t pk, float(&acc)[E]) {
        const size_t at = r * rowPacks + (pk - row * rowPacks);  // in the slots
        if (!run.template sumInRankOrder<T, NR>(Op::AllReduceNorm, channel, 0, at, in[pk], acc)) return false;
        run.clearRead(at);
        const Pack rounded = dev::notEmpty(dev::toPack<T>(acc));
#pragma unroll 8
        for (int j = 1; j < W; ++j) run.slot((rank + j) % W, run.buf, 0, rank)[halfPacks + at] = rounded;
#pragma unroll
        for (int e = 0; e < E; ++e) acc[e] = 0.f;
        dev::accumulate<T>(acc, rounded);
        return true;
      };
      failed |= !norm::normRow<T>(c, row, 0, rowPacks, threads, failed, invScale, sum, total);
    }

    // 3. Every peer's block of rounded sums from our second half, then residual + norm.
    for (int j = 1; j < W; ++j) {
      const int s = (rank + j) % W;
      const Pack* from = run.slot(rank, run.buf, 0, s) + halfPacks;
      for (size_t r = blockIdx.x; r < blockRows(s); r += gridDim.x, parity ^= 1) {
        const size_t row = first + blockBegin(s) + r;
        auto sum = [&](size_t pk, float(&acc)[E]) {
          const size_t at = r * rowPacks + (pk - row * rowPacks);
          Pack v = dev::loadVolatilePack(from + at);
          if (!dev::pollPack(dc, Op::AllReduceNorm, channel, run.buf, from + at, v, s)) return false;
          run.clearReadFrom(halfPacks + at, s);
#pragma unroll
          for (int e = 0; e < E; ++e) acc[e] = 0.f;
          dev::accumulate<T>(acc, v);
          return true;
        };
        failed |= !norm::normRow<T>(c, row, 0, rowPacks, threads, failed, invScale, sum, total);
      }
    }
  }
  // A wait that gave up recorded its error; the Rows state moved on regardless.
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(allReduceNormTwoShotKernel<__nv_bfloat16, 2>);

size_t allReduceNormTwoShotRows(int nranks, size_t hidden, fcDataType_t datatype) {
  // A rank's block of a pass fits half a slot.
  const size_t rowBytes = hidden * dataTypeSize(datatype), half = lamportSlotBytes(nranks) / 2;
  return rowBytes == 0 || rowBytes > half ? 0 : size_t(nranks) * (half / rowBytes);
}

fcResult_t launchAllReduceNormTwoShot(const DeviceComm& dc, int channel, const NormCall& c, bool pdl,
                                      cudaStream_t stream, uint32_t callerSig) {
  const size_t passRows = allReduceNormTwoShotRows(dc.nranks, c.hidden, c.datatype);
  if (passRows == 0)
    return setError(fcInternalError, "all-reduce + RMSNorm two-shot: a row of %zu elements does not fit",
                    c.hidden);
  // The kind (two-shot) is part of the shape in the call header: a rank taking the
  // one-shot kernel for the same shape is a mismatch.
  const uint32_t sig = callerSig != 0
                           ? callerSig
                           : opSignature(Op::AllReduceNorm, uint32_t(c.datatype), shapeKey(c.tokens, c.hidden, 2, 0));
  return withElementType(c.datatype, "all-reduce + RMSNorm two-shot", [&](auto tag) {
    using T = decltype(tag);
    // A CTA per row of a rank's block (rows in turn beyond maxCtas).
    const size_t per = ((c.tokens < passRows ? c.tokens : passRows) + size_t(dc.nranks) - 1) / size_t(dc.nranks);
    const unsigned grid = unsigned(per < size_t(dc.maxCtas) ? per : size_t(dc.maxCtas));
    const unsigned threads =
        norm::rowThreads(c.hidden / dev::PackTraits<T>::kElems) + unsigned(dev::kCallWarpThreads);
    auto kernel = byWorldSize(dc.nranks, [](auto nr) { return allReduceNormTwoShotKernel<T, decltype(nr)::value>; });
    return launchKernelEx(kernel, dim3(grid), dim3(threads), stream, pdl, dc, channel, c, passRows, sig);
  });
}

}  // namespace fc
