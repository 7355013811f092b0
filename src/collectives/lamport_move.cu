// The Lamport all-gather and reduce-scatter, with no flags and no barrier: fcReduceScatter
// for blocks up to a push slot at up to 4 ranks (comm.cc, chooseReduceScatter), and the
// all-gather of fcAllGatherMatmul's unfused path into its own scratch (not fcAllGather:
// see the last paragraph). They are the one-shot all-reduce's protocol (collectives/lamport.cuh) with
// other data in the pushes, on its push buffers and its per-CTA state: the same
// instance, so the three calls interleave on a channel as one sequence of runs.
//   all-gather: every rank pushes its block into its slot of every peer's buffer and
//     copies it into its own place of recvbuff; then polls for every peer's block and
//     stores it into that peer's place.
//   reduce-scatter: every rank pushes block s of its input into its slot of rank s's
//     buffer; then polls for every peer's piece of its own block and adds them to its
//     own in rank order (fp32, one rounding: the same bits as the barrier kernels).
// The SM kernels with barriers pull after a staging copy and two barrier round trips;
// here each rank waits only for data already on its way, one round trip (perf-log.md,
// Tuning table: chooseReduceScatter).
//
// An all-ones 32-bit word cannot be pushed (it marks "not written"): like the
// all-reduce, the all-gather turns it into another NaN (0x7fffffff), so a block holding
// NaNs whose payload bits are all ones arrives as a NaN with other payload bits. Every
// other value arrives bit for bit. A GEMM cannot tell such NaNs apart, and a sum of
// one is a NaN anyway; but a copy must keep every bit (a caller's 0xff poison, integer
// data in a float buffer), so fcAllGather keeps its SM and copy-engine kernels.
#include "collectives/chunks.cuh"
#include "collectives/collectives.h"
#include "collectives/dispatch.cuh"
#include "collectives/lamport.cuh"
#include "collectives/launch.h"
#include "core/preload.h"
#include "core/result.h"

namespace fc {
namespace {

using dev::Pack;

enum class Move { AllGather, ReduceScatter };

// count: elements per block (fcAllGather's sendcount, fcReduceScatter's recvcount).
template <typename T, int NR, Move M>
__global__ void __launch_bounds__(dev::kLamportMaxThreads)
    lamportMoveKernel(const __grid_constant__ DeviceComm dc, int channel, const T* in, T* out, size_t count,
                      uint32_t sig) {
  constexpr int E = dev::PackTraits<T>::kElems;
  const Op op = opOf(sig);  // the move's own, or the fused op's that launched it
  const int W = NR > 0 ? NR : dc.nranks;
  const int rank = dc.rank;
  const size_t packs = (count + E - 1) / E;
  const unsigned threads = dev::lamportDataThreads();
  // Every block starts 16-byte aligned when the buffers and the block size are.
  const bool vec = dev::aligned16(in) && dev::aligned16(out) && count * sizeof(T) % 16 == 0;
  dev::waitForPreviousGrid();  // programmatic dependent launch, as the one-shot's
  dev::LamportRun<dev::LamportKind::OneShot> run(dc, channel);
  dev::LamportCall call(dc, channel, sig, count);
  // Every thread has read the state; move it on now (saveNext).
  __syncthreads();
  if (threadIdx.x == 0) run.saveNext(uint32_t((packs + run.kChunkPacks - 1) / run.kChunkPacks));
  if (call.isCallWarp()) {
    call.run(op, channel);  // a mismatch is recorded
    return;
  }

  // 1. Pushes: our block (all-gather) or block s (reduce-scatter) into our slot of
  //    every peer s's current buffer.
  //    NR > 0: each peer's slot computed once (PeerSlots, as the one-shot's), not per
  //    push: per push it cost registers and spills (lamport.cuh, LamportRun).
  T* const mine = out + size_t(rank) * count;  // all-gather: our place in recvbuff
  const dev::PeerSlots<NR - 1> to = run.template pushSlots<NR>(0, run.buf);
  for (size_t k = threadIdx.x;; k += threads) {
    const size_t pk = run.ownedPack(k);
    if (pk >= packs) break;
    if constexpr (M == Move::AllGather) {
      const Pack v = dev::loadInputPack(in, pk * E, count, vec);
      if constexpr (NR > 0) {
#pragma unroll
        for (int j = 0; j < NR - 1; ++j) to.p[j][pk] = dev::notEmpty(v);
      } else {
        for (int j = 1; j < W; ++j) run.slot((rank + j) % W, run.buf, 0, rank)[pk] = dev::notEmpty(v);
      }
      if (in != mine) dev::storePack(mine, pk * E, count, v, vec);  // not in place: our own block
    } else if constexpr (NR > 0) {
#pragma unroll
      for (int j = 0; j < NR - 1; ++j) {
        const int s = (rank + 1 + j) % NR;
        to.p[j][pk] = dev::notEmpty(dev::loadInputPack(in + size_t(s) * count, pk * E, count, vec));
      }
    } else {
      for (int j = 1; j < W; ++j) {
        const int s = (rank + j) % W;
        run.slot(s, run.buf, 0, rank)[pk] = dev::notEmpty(dev::loadInputPack(in + size_t(s) * count, pk * E, count, vec));
      }
    }
  }
  // The next kernel may launch now; it waits for this one before it reads anything.
  dev::allowDependentLaunch();
  // Reset our previous run's buffer for the run after next while the pushes fly.
  run.template resetStale<NR>();

  // 2. Polls: every peer's block into its place (all-gather), or every peer's piece of
  //    our block summed with ours (reduce-scatter). A wait that gives up has recorded
  //    the error: the thread just stops.
  const dev::PeerSlots<NR - 1> from = run.template ownSlots<NR>(0, run.buf);
  for (size_t k = threadIdx.x;; k += threads) {
    const size_t pk = run.ownedPack(k);
    if (pk >= packs) break;
    if constexpr (M == Move::ReduceScatter) {
      float acc[E];
      if (!run.template sumInRankOrder<T, NR>(op, channel, from, pk,
                                              dev::loadInputPack(in + size_t(rank) * count, pk * E, count, vec), acc))
        return;
      dev::storePack(out, pk * E, count, dev::toPack<T>(acc), vec);
    } else if constexpr (NR > 0) {
      dev::PeerPacks<NR - 1> peers;  // all peers' loads in flight at once
      run.template lookAtPeers<NR>(from, pk, peers);
      if (!run.waitForPeers(op, channel, peers)) return;
#pragma unroll
      for (int j = 0; j < NR - 1; ++j)
        dev::storePack(out + size_t((rank + 1 + j) % NR) * count, pk * E, count, peers.v[j], vec);
    } else {
      for (int j = 1; j < W; ++j) {
        const int s = (rank + j) % W;
        const Pack* p = run.slot(rank, run.buf, 0, s) + pk;
        Pack v = dev::loadVolatilePack(p);
        if (!dev::pollPack(dc, op, channel, run.buf, p, v, s)) return;
        dev::storePack(out + size_t(s) * count, pk * E, count, v, vec);
      }
    }
  }
}

template <Move M>
fcResult_t launchMove(const DeviceComm& dc, int channel, const void* in, void* out, size_t count,
                      fcDataType_t datatype, bool pdl, cudaStream_t stream, uint32_t callerSig = 0) {
  // A signature of its own per kind (the op and the Lamport protocol), so that ranks
  // calling another op, count or dtype at the same point are caught by the headers; or
  // the calling op's (a fused op's: its whole shape).
  const uint32_t sig = callerSig != 0 ? callerSig
                                      : opSignature(M == Move::AllGather ? Op::AllGather : Op::ReduceScatter,
                                                    uint32_t(datatype), shapeKey(count, 0, 0, 3));
  return withElementType(datatype, M == Move::AllGather ? "Lamport all-gather" : "Lamport reduce-scatter",
                         [&](auto tag) {
                           using T = decltype(tag);
                           constexpr size_t E = dev::PackTraits<T>::kElems;
                           constexpr size_t P = dev::LamportTraits<dev::LamportKind::OneShot>::kChunkPacks;
                           const dev::LamportShape shape =
                               dev::lamportShape(((count + E - 1) / E + P - 1) / P, int(P), dc.maxCtas);
                           auto kernel = byWorldSize(dc.nranks, [](auto nr) {
                             return lamportMoveKernel<T, decltype(nr)::value, M>;
                           });
                           return launchKernelEx(kernel, dim3(shape.grid), dim3(shape.threads), stream, pdl, dc,
                                                 channel, static_cast<const T*>(in), static_cast<T*>(out), count,
                                                 sig);
                         });
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(lamportMoveKernel<float, 2, Move::AllGather>);

fcResult_t launchAllGatherLamport(const DeviceComm& dc, int channel, const void* sendbuff, void* recvbuff,
                                  size_t sendcount, fcDataType_t datatype, bool pdl, cudaStream_t stream) {
  return launchMove<Move::AllGather>(dc, channel, sendbuff, recvbuff, sendcount, datatype, pdl, stream);
}

fcResult_t launchReduceScatterLamport(const DeviceComm& dc, int channel, const void* sendbuff, void* recvbuff,
                                      size_t recvcount, fcDataType_t datatype, bool pdl, cudaStream_t stream,
                                      uint32_t sig) {
  return launchMove<Move::ReduceScatter>(dc, channel, sendbuff, recvbuff, recvcount, datatype, pdl, stream, sig);
}

}  // namespace fc
