// All-reduce + residual + RMSNorm above the one-kernel limit, at up to 4 ranks: a
// two-shot in one kernel on the Rows kind's push buffers (collectives/lamport.cuh), so
// that the norm rides on the all-reduce's data as it arrives instead of a second
// kernel's pass over memory (TensorRT-LLM's fused two-shot splits the tokens among
// the ranks the same way; our own protocol). Rows are split into passes of up to
// passRows rows; in each pass rank s owns a block of ceil(rows / W) of them. Where a
// call takes more than one pass, a pass's blocks are whole rounds of the grid's
// clusters (tuning::normTwoShotBlockRows): passes of 204-row blocks on 128 clusters
// would give clusters 0-75 two rows of each and the rest one, and since a block's first
// rows are the same clusters' in every pass, the call would cost what they do.
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
// FC_ARNORM_GATHER_SET=1 (a measurement form): step 2's pushes go into a set of their own
// (device_comm.h, lamportGatherBytes) instead of the second half of the Rows set's slots,
// so that a rank's block of a pass may fill a whole slot: half as many passes.
//
// Clusters. Where a pass's blocks have too few rows to fill the grid (long rows in a
// small slot: 16-64 rows at hidden 4096-16384 at 4 ranks), a row is a thread block
// cluster's (tuning::normTwoShotClusterCtas): its CTA of cluster rank k takes packs
// [k * share, (k + 1) * share) of the row in every step, and the row's sum of squares
// goes through distributed shared memory (norm_rows.cuh, ClusterRowSum), as in the one
// kernel.
//
// Reuse. Row r of a pass's block is cluster r % clusters' on every rank (the same
// packs of it the same CTA's), in both halves and every pass, so a CTA only ever
// exchanges with the same CTA of its peers, as in the
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
#include "tuning/tuning.h"

namespace fc {
namespace {

using dev::Pack;
using Run = dev::LamportRun<dev::LamportKind::Rows>;

template <typename T, int NR>
__global__ void __launch_bounds__(dev::kLamportMaxThreads)
    allReduceNormTwoShotKernel(DeviceComm dc, int channel, NormCall c, size_t passRows, uint32_t sig) {
  constexpr int E = dev::PackTraits<T>::kElems;
  __shared__ __align__(16) float red[2][32];
  __shared__ uint64_t clusterSums[2][norm::ClusterRowSum::kMaxCtas];
  namespace cg = cooperative_groups;
  const unsigned ctas = cg::this_cluster().num_blocks(), clusterRank = cg::this_cluster().block_rank();
  const int W = NR > 0 ? NR : dc.nranks;
  const int rank = dc.rank;
  const size_t rowPacks = c.hidden / E;
  // This CTA's packs of each of its cluster's rows, and the cluster's rows of a block.
  const size_t share = (rowPacks + ctas - 1) / ctas;
  const size_t begin = size_t(clusterRank) * share < rowPacks ? size_t(clusterRank) * share : rowPacks;
  const size_t end = begin + share < rowPacks ? begin + share : rowPacks;
  const size_t firstRow = blockIdx.x / ctas, rowStep = gridDim.x / ctas;
  const unsigned threads = dev::lamportDataThreads();
  const Pack* in = static_cast<const Pack*>(c.in);
  const size_t passes = (c.tokens + passRows - 1) / passRows;
  // The cluster's slots hold no row yet (sequence 0) before this CTA tells its partners
  // it has started; the cluster barriers only in a cluster launch (allreduce_norm.cu
  // says why).
  const bool cluster = ctas > 1;
  if (threadIdx.x < 2 * norm::ClusterRowSum::kMaxCtas) (&clusterSums[0][0])[threadIdx.x] = 0u;
  if (cluster) asm volatile("barrier.cluster.arrive.release;" ::: "memory");
  dev::waitForPreviousGrid();  // programmatic dependent launch, as the one-shot's
  Run run(dc, channel);
  dev::LamportCall call(dc, channel, sig, c.tokens * c.hidden);
  const float invScale = c.scale ? 1.f / *c.scale : 1.f;
  // The all-gather pushes: the second half of the Rows set's slots, or (FC_ARNORM_GATHER_SET)
  // the whole slots of the gather set (device_comm.h).
  const bool gatherSet = dc.rowsGatherOffset != 0;
  const size_t halfPacks = gatherSet ? 0 : run.slotBytes / 2 / sizeof(Pack);
  auto gatherSlot = [&](int owner, int sender) {
    return gatherSet ? run.gatherSlot(channel, owner, run.buf, sender)
                     : run.slot(owner, run.buf, 0, sender) + halfPacks;
  };

  // Every thread has read the buffer index before this CTA's arrival lets the last
  // CTA move it on (by the number of passes).
  __syncthreads();
  if (call.isCallWarp()) {
    const bool arriving = threadIdx.x - threads == unsigned(dev::kCallWarpThreads - 1);
    const uint32_t before = arriving ? run.arrive() : 0u;
    if (blockIdx.x == 0) call.run(opOf(sig), channel);  // a mismatch is recorded
    if (arriving) run.advanceIfLast(before, uint32_t(passes));
    // This warp no longer exits here (it meets the cluster barriers at the end), so it
    // lets the next kernel launch itself rather than hold the trigger back to the end.
    dev::allowDependentLaunch();
    if (cluster) asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
  } else {
    if (cluster) asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
    const uint32_t start = run.buf;
    bool failed = false;
    int parity = 0;
    uint32_t seq = 0;  // the cluster's rows so far: every CTA of it takes the same ones
    auto total = [&](float ss, bool& f) {
      const norm::ClusterRowSum sum{dc, opOf(sig), channel, clusterSums, red, threads, ctas, clusterRank, parity, seq};
      return sum(ss, f);
    };
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
        for (size_t r = firstRow; r < blockRows(s); r += rowStep) {
          const Pack* from = in + (first + blockBegin(s) + r) * rowPacks;
          for (size_t q = begin + threadIdx.x; q < end; q += threads) to[r * rowPacks + q] = dev::notEmpty(from[q]);
        }
      }
      // The next kernel may start launching; it waits for this one before it reads.
      if (p == 0) dev::allowDependentLaunch();

      // 2. Our block: every rank's rows summed in rank order, rounded once, pushed to
      //    every peer's second half (the same bits everywhere), then residual + norm.
      for (size_t r = firstRow; r < blockRows(rank); r += rowStep, parity ^= 1) {
        const size_t row = first + blockBegin(rank) + r;
        auto sum = [&](size_t pk, float(&acc)[E]) {
          const size_t at = r * rowPacks + (pk - row * rowPacks);  // in the slots
          if (!run.template sumInRankOrder<T, NR>(opOf(sig), channel, 0, at, in[pk], acc)) return false;
          run.clearRead(at);
          const Pack rounded = dev::notEmpty(dev::toPack<T>(acc));
#pragma unroll 8
          for (int j = 1; j < W; ++j) gatherSlot((rank + j) % W, rank)[at] = rounded;
#pragma unroll
          for (int e = 0; e < E; ++e) acc[e] = 0.f;
          dev::accumulate<T>(acc, rounded);
          return true;
        };
        ++seq;
        failed |= !norm::normRow<T>(c, row, begin, end, threads, failed, invScale, sum, total);
      }

      // 3. Every peer's block of rounded sums from our second half, then residual + norm.
      for (int j = 1; j < W; ++j) {
        const int s = (rank + j) % W;
        Pack* from = gatherSlot(rank, s);
        for (size_t r = firstRow; r < blockRows(s); r += rowStep, parity ^= 1) {
          const size_t row = first + blockBegin(s) + r;
          auto sum = [&](size_t pk, float(&acc)[E]) {
            const size_t at = r * rowPacks + (pk - row * rowPacks);
            Pack v = dev::loadVolatilePack(from + at);
            if (!dev::pollPack(dc, opOf(sig), channel, run.buf, from + at, v, s)) return false;
            // Cleared once read, as the Rows kind's packs are (LamportRun::clearRead).
            from[at] = Pack{kLamportEmpty, kLamportEmpty, kLamportEmpty, kLamportEmpty};
#pragma unroll
            for (int e = 0; e < E; ++e) acc[e] = 0.f;
            dev::accumulate<T>(acc, v);
            return true;
          };
          ++seq;
          failed |= !norm::normRow<T>(c, row, begin, end, threads, failed, invScale, sum, total);
        }
      }
    }
    // A wait that gave up recorded its error; the Rows state moved on regardless.
  }
  // No CTA of a cluster leaves while a partner may still write into its shared memory
  // (allreduce_norm.cu says why).
  if (cluster) {
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
  }
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(allReduceNormTwoShotKernel<__nv_bfloat16, 2>);

size_t allReduceNormTwoShotRows(int nranks, size_t hidden, fcDataType_t datatype, bool gatherSet) {
  // A rank's block of a pass fits half a slot (the other half takes the all-gather), or a
  // whole one with the gather sets.
  const size_t rowBytes = hidden * dataTypeSize(datatype),
               half = gatherSet ? lamportSlotBytes(nranks) : lamportSlotBytes(nranks) / 2;
  return rowBytes == 0 || rowBytes > half ? 0 : size_t(nranks) * (half / rowBytes);
}

fcResult_t launchAllReduceNormTwoShot(const DeviceComm& dc, int channel, const NormCall& c, bool pdl,
                                      bool alignPasses, cudaStream_t stream, uint32_t callerSig) {
  const size_t capRows = allReduceNormTwoShotRows(dc.nranks, c.hidden, c.datatype, dc.rowsGatherOffset != 0);
  if (capRows == 0)
    return setError(fcInternalError, "all-reduce + RMSNorm two-shot: a row of %zu elements does not fit",
                    c.hidden);
  // The kind (two-shot) is part of the shape in the call header: a rank taking the
  // one-shot kernel for the same shape is a mismatch.
  const uint32_t sig = callerSig != 0
                           ? callerSig
                           : opSignature(Op::AllReduceNorm, uint32_t(c.datatype), shapeKey(c.tokens, c.hidden, 2, 0));
  return withElementType(c.datatype, "all-reduce + RMSNorm two-shot", [&](auto tag) {
    using T = decltype(tag);
    // A cluster of ctas CTAs per row of a rank's block (rows in turn beyond maxCtas),
    // more than one where the rows alone leave the grid short.
    const size_t rowPacks = c.hidden / dev::PackTraits<T>::kElems;
    // Passes of whole rounds of the clusters where a call takes more than one (tuning).
    const size_t W = size_t(dc.nranks),
                 passRows = W * tuning::normTwoShotBlockRows(c.tokens, dc.nranks, capRows / W, rowPacks,
                                                             size_t(dc.maxCtas), alignPasses);
    const size_t per = ((c.tokens < passRows ? c.tokens : passRows) + size_t(dc.nranks) - 1) / size_t(dc.nranks);
    const unsigned ctas = tuning::normTwoShotClusterCtas(per, rowPacks, size_t(dc.maxCtas));
    const size_t clusters = per < size_t(dc.maxCtas) / ctas ? per : size_t(dc.maxCtas) / ctas;
    const unsigned threads = norm::rowThreads((rowPacks + ctas - 1) / ctas) + unsigned(dev::kCallWarpThreads);
    auto kernel = byWorldSize(dc.nranks, [](auto nr) { return allReduceNormTwoShotKernel<T, decltype(nr)::value>; });
    return launchClusterKernelEx(kernel, dim3(unsigned(clusters * ctas)), dim3(threads), ctas, stream, pdl, dc,
                                 channel, c, passRows, sig);
  });
}

}  // namespace fc
