// Lamport one-shot all-reduce: the small-message path of fcAllReduceOneShot and
// fcAllReduce (TensorRT-LLM's "Lamport" all-reduce idea; our own protocol below).
//
// No flags and no barrier: every rank pushes its input straight into a slot of every
// peer's push buffer (16-byte remote stores), and every rank polls its own buffer
// until each peer's packs are there, then adds them to its own input in fp32 and
// rounds once. "There"
// means no 32-bit word still holds kLamportEmpty (all ones): writers never write that
// word (an all-ones word is a NaN pattern; it is turned into another NaN, so sums are
// unchanged), and readers reset what they consumed.
//
// Reuse without barriers, per CTA (CTA b owns chunks c = b (mod maxCtas), on every
// rank; collectives/lamport.cuh), with three buffers used in turn (run j of CTA b uses buffer j % 3):
// - a peer can be at most one run ahead of us: its run j+1 cannot finish before it
//   has read our run-(j+1) pushes, which we make only after our run j finished;
// - so in run j, buffer (j+1) % 3 may already be filling with a fast peer's data,
//   buffer j % 3 is ours to read, and buffer (j+2) % 3 - used in run j-1 and fully
//   read then - is free: run j resets it (every chunk run j-1 used) for run j+2,
//   which no peer can start before our run j+1 has started, i.e. after this kernel.
// The buffer index and the chunk counts per buffer live in device memory (graph
// replays continue the sequence).
//
// Mismatched calls (another count, dtype, or the two-shot on a peer) are caught by
// the call warp's headers (lamport.cuh, LamportCall), off the data path.
#include "collectives/chunks.cuh"
#include "collectives/collectives.h"
#include "collectives/dispatch.cuh"
#include "collectives/lamport.cuh"
#include "collectives/lamport_timeline.cuh"
#include "collectives/launch.h"
#include "core/preload.h"
#include "core/result.h"
#include "tuning/tuning.h"

namespace fc {
namespace {

using dev::kThreads;

// kMeasure: `stages` picks the stages (fc-bench stages); otherwise every stage runs
// once and the argument is ignored, so real calls run code with no stage branches.
// kLean (FC_LAMPORT_STAGES=lean, a measurement form: it timed within 0.1 us of the
// default either way, design.md): with the world size known, the push and sum loops index in 32 bits and
// load and store whole aligned packs without the bounds checks (device_comm.h,
// kLamportLean: the measurement kernel's few uniform branches cost 7 % at 4 MiB, so
// the loops' instruction count is worth cutting). kLate (FC_LAMPORT_STAGES=late, a
// measurement form): the next kernel allowed to launch only when this CTA is done (as
// FlashInfer's one-shot does), not once its pushes are issued (device_comm.h).
// kTimeline (FC_LAMPORT_STAGES=timeline, a measurement form): the production kernel
// with per-CTA phase stamps, printed every few calls (lamport_timeline.cuh). kWide: the
// production kernel built for CTAs of up to 1024 threads (launch bounds 1024: at most 64
// registers a thread), which real calls run with one data thread per pack where a CTA owns
// 513-992 packs (tuning::lamportWideCtas; FC_LAMPORT_STAGES=narrow, a measurement form,
// keeps the 512 data threads there, device_comm.h).
template <typename T, int NR, bool kMeasure, bool kLean = false, bool kLate = false, bool kTimeline = false,
          bool kWide = false>
__global__ void __launch_bounds__(kWide ? 1024 : dev::kLamportMaxThreads)
    allReduceLamportKernel(const __grid_constant__ DeviceComm dc, int channel, const T* in, T* out, size_t count,
                           uint32_t sig, uint32_t stagesArg) {
  static_assert(!(kMeasure && (kLean || kLate || kTimeline || kWide)),
                "the lean, late, timeline and wide forms run every stage once");
  static_assert(!(kLean && kTimeline), "the timeline stamps the production loops");
  constexpr bool kLeanLoops = kLean && NR > 0;
  constexpr int E = dev::PackTraits<T>::kElems;
  const int W = NR > 0 ? NR : dc.nranks;
  const int rank = dc.rank;
  const size_t packs = (count + E - 1) / E;
  const unsigned threads = dev::lamportDataThreads();
  const bool vecIn = dev::aligned16(in), vecOut = dev::aligned16(out);
  // Programmatic dependent launch: the launch and the lines above overlapped the
  // previous kernel; its writes (our input, the Lamport state) are visible after this.
  dev::waitForPreviousGrid();
  dev::Timeline tl;
  if constexpr (kTimeline) tl.begin();  // before the barrier below
  dev::LamportRun<dev::LamportKind::OneShot> run(dc, channel);
  dev::LamportCall call(dc, channel, sig, count);

  // How often each stage runs: once in every real call (kLamportFull); 0 or 2 times
  // only when its cost is measured (LamportStage).
  const uint32_t stages = kMeasure ? stagesArg : uint32_t(kLamportFull);
  auto times = [stages](uint32_t stage, uint32_t twice) { return (stages & stage) ? (stages & twice) ? 2 : 1 : 0; };
  // Every thread has read the state; move it on now rather than at the end (saveNext).
  __syncthreads();
  if (threadIdx.x == 0 && (stages & kLamportSave))
    run.saveNext(uint32_t((packs + run.kChunkPacks - 1) / run.kChunkPacks));
  // Where the reset of the run before's buffer runs: between the pushes and the polls
  // (every real call), or, measured (kMeasure), after the sums or in the call warp.
  const bool resetInCallWarp = kMeasure && (stages & kLamportResetByCallWarp);
  const bool resetLate = kMeasure && (stages & kLamportResetLate);
  if (call.isCallWarp()) {
    if (stages & kLamportCall) call.run(opOf(sig), channel);  // a mismatch is recorded
    if (resetInCallWarp)
      for (int rep = times(kLamportReset, kLamportResetTwice); rep > 0; --rep)
        run.template resetStale<NR>(threadIdx.x - dev::lamportDataThreads(), dev::kCallWarpThreads);
    return;
  }
  // 1. Push our packs into our slot of every peer's current buffer (set 0). With the
  // world size known at compile time, every slot address is computed once, here.
  // Lean: packs below `whole` lie wholly inside the input (and output), 16-byte aligned.
  const uint32_t packs32 = uint32_t(packs);  // at most a slot's packs
  const uint32_t whole = vecIn ? uint32_t(count / E) : 0u, wholeOut = vecOut ? uint32_t(count / E) : 0u;
  const dev::Pack* const in4 = reinterpret_cast<const dev::Pack*>(in);
  for (int rep = times(kLamportPush, kLamportPushTwice); rep > 0; --rep)
    if constexpr (kLeanLoops) {
      const dev::PeerSlots<NR - 1> to = run.template pushSlots<NR>(0, run.buf);
      for (uint32_t k = threadIdx.x;; k += threads) {
        const uint32_t pk = run.ownedPack32(k);
        if (pk >= packs32) break;
        const dev::Pack v = dev::notEmpty(pk < whole ? in4[pk] : dev::loadInputPack(in, size_t(pk) * E, count, vecIn));
#pragma unroll
        for (int j = 0; j < NR - 1; ++j) to.p[j][pk] = v;
      }
    } else if constexpr (NR > 0) {
      const dev::PeerSlots<NR - 1> to = run.template pushSlots<NR>(0, run.buf);
      for (size_t k = threadIdx.x;; k += threads) {
        const size_t pk = run.ownedPack(k);
        if (pk >= packs) break;
        const dev::Pack v = dev::notEmpty(dev::loadInputPack(in, pk * E, count, vecIn));
#pragma unroll
        for (int j = 0; j < NR - 1; ++j) to.p[j][pk] = v;
      }
    } else {
      for (size_t k = threadIdx.x;; k += threads) {
        const size_t pk = run.ownedPack(k);
        if (pk >= packs) break;
        const dev::Pack v = dev::notEmpty(dev::loadInputPack(in, pk * E, count, vecIn));
        for (int j = 1; j < W; ++j) run.slot((rank + j) % W, run.buf, 0, rank)[pk] = v;
      }
    }

  if constexpr (kTimeline) tl.pushed();
  // The next kernel may launch now; it waits (griddepcontrol.wait) for this one to
  // finish before it reads anything.
  if constexpr (!kLate) dev::allowDependentLaunch();
  // Reset our previous run's buffer (every chunk it used) for the run after next,
  // while the pushes are on their way.
  if (!resetInCallWarp && !resetLate)
    for (int rep = times(kLamportReset, kLamportResetTwice); rep > 0; --rep) run.template resetStale<NR>();
  if constexpr (kTimeline) tl.reset();

  // 2. Poll our buffer for every peer's packs; add them to our own input; store. A
  // wait that gives up has recorded the error: the thread just stops.
  const dev::PeerSlots<NR - 1> from = run.template ownSlots<NR>(0, run.buf);
  if constexpr (kLeanLoops) {
    dev::Pack* const out4 = reinterpret_cast<dev::Pack*>(out);
    for (uint32_t k = threadIdx.x;; k += threads) {
      const uint32_t pk = run.ownedPack32(k);
      if (pk >= packs32) break;
      const dev::Pack own = pk < whole ? in4[pk] : dev::loadInputPack(in, size_t(pk) * E, count, vecIn);
      float acc[E];
      if (!run.template sumInRankOrder<T, NR>(opOf(sig), channel, from, pk, own, acc)) return;
      const dev::Pack r = dev::toPack<T>(acc);
      if (pk < wholeOut)
        out4[pk] = r;
      else
        dev::storePack(out, size_t(pk) * E, count, r, vecOut);
    }
  } else {
    for (int rep = times(kLamportSum, kLamportSumTwice); rep > 0; --rep)
      for (size_t k = threadIdx.x;; k += threads) {
        const size_t pk = run.ownedPack(k);
        if (pk >= packs) break;
        const size_t i = pk * E;
        float acc[E];
        if (!run.template sumInRankOrder<T, NR>(opOf(sig), channel, from, pk,
                                                dev::loadInputPack(in, i, count, vecIn), acc))
          return;
        if (stages & kLamportClearRead) run.clearRead(from, pk);  // measurement form (device_comm.h)
        dev::storePack(out, i, count, dev::toPack<T>(acc), vecOut);
        if constexpr (kTimeline) tl.summed();
      }
  }
  if constexpr (kTimeline) tl.end(threads, count * sizeof(T));
  if (resetLate)
    for (int rep = times(kLamportReset, kLamportResetTwice); rep > 0; --rep) run.template resetStale<NR>();
  if constexpr (kLate) dev::allowDependentLaunch();
}

// The kernels real calls run, for the world size: CTAs of up to 512 data threads, or
// (wide) of up to 992.
template <typename T>
auto productionKernel(int nranks, bool wide) {
  return wide ? byWorldSize(nranks,
                            [](auto nr) {
                              return allReduceLamportKernel<T, decltype(nr)::value, false, false, false, false, true>;
                            })
              : byWorldSize(nranks, [](auto nr) { return allReduceLamportKernel<T, decltype(nr)::value, false>; });
}

template <typename T>
fcResult_t launch(const DeviceComm& dc, int channel, const void* in, void* out, size_t count, uint32_t sig,
                  bool pdl, uint32_t stages, cudaStream_t stream) {
  constexpr size_t E = dev::PackTraits<T>::kElems;
  constexpr size_t P = dev::LamportTraits<dev::LamportKind::OneShot>::kChunkPacks;
  const size_t chunks = ((count + E - 1) / E + P - 1) / P;
  // Every CTA that ever ran keeps state; launching the same CTAs for the same count on
  // every rank keeps the per-CTA buffer sequences equal across ranks.
  const dev::LamportShape narrow = dev::lamportShape(chunks, int(P), dc.maxCtas);
  // Where the CTAs sit: one to an SM (dc.soloSmemBytes of unused shared memory) by the
  // packs the busiest data thread owns (tuning.h), or where a measurement form says
  // (solo, shared). The measurement forms lean, late, timeline, narrow and wide are
  // instantiations of their own or the production kernel at another width, every stage
  // once (no stage branches), timed against `full` directly.
  const uint32_t form = stages & ~uint32_t(kLamportLean | kLamportLateTrigger | kLamportShared | kLamportSolo |
                                           kLamportTimeline | kLamportNarrow | kLamportWide);
  // Packs a CTA owns: every form launches the same grid.
  const size_t perCta = (chunks + narrow.grid - 1) / narrow.grid * P;
  const bool lean = form == kLamportFull && (stages & kLamportLean);
  const bool late = form == kLamportFull && (stages & kLamportLateTrigger);
  const bool timeline = form == kLamportFull && (stages & kLamportTimeline);
  const bool production = form == kLamportFull && !lean && !late && !timeline;
  // Up to 992 data threads where that gives each one pack (the wide production kernel),
  // unless the narrow measurement form keeps 512 (or the wide one takes 992 wherever a
  // CTA owns more than 512).
  constexpr int kWideData = 1024 - dev::kCallWarpThreads;
  const bool rule = tuning::lamportWideCtas(perCta, size_t(dev::kThreads), size_t(kWideData));
  const bool wide =
      production && !(stages & kLamportNarrow) && ((stages & kLamportWide) ? perCta > size_t(dev::kThreads) : rule);
  const dev::LamportShape shape = wide ? dev::lamportShape(chunks, int(P), dc.maxCtas, kWideData) : narrow;
  const size_t dataThreads = shape.threads - dev::kCallWarpThreads;
  const bool solo = (stages & kLamportSolo) ||
                    (!(stages & kLamportShared) && dc.soloSmemBytes != 0 &&
                     tuning::lamportSoloCtas((perCta + dataThreads - 1) / dataThreads));
  auto kernel =
      timeline ? byWorldSize(dc.nranks,
                             [](auto nr) { return allReduceLamportKernel<T, decltype(nr)::value, false, false, false, true>; })
      : production ? productionKernel<T>(dc.nranks, wide)
      : late ? byWorldSize(dc.nranks,
                           [](auto nr) { return allReduceLamportKernel<T, decltype(nr)::value, false, false, true>; })
      : lean ? byWorldSize(dc.nranks, [](auto nr) { return allReduceLamportKernel<T, decltype(nr)::value, false, true>; })
             : byWorldSize(dc.nranks, [](auto nr) { return allReduceLamportKernel<T, decltype(nr)::value, true>; });
  // The production kernel's shared-memory limit was raised with the communicator
  // (prepareAllReduceLamport); a measurement form's is raised here, per call.
  size_t smem = 0;
  if (solo && production && dc.soloSmemBytes != 0)
    smem = dc.soloSmemBytes;
  else if (solo)
    FC_CHECK(soloSmem(kernel, &smem));
  return launchKernelWith(kernel, dim3(shape.grid), dim3(shape.threads), 1u, smem, stream, pdl, dc, channel,
                          static_cast<const T*>(in), static_cast<T*>(out), count, sig, stages);
}

}  // namespace

// Loaded with the communicator, not at first launch (core/preload.h).
FC_PRELOAD_MODULE_OF(allReduceLamportKernel<float, 2, false>);

fcResult_t prepareAllReduceLamport(const DeviceComm& dc) {
  if (dc.soloSmemBytes == 0) return fcSuccess;
  for (fcDataType_t t : {fcFloat32, fcFloat16, fcBfloat16}) {
    FC_CHECK(withElementType(t, "Lamport all-reduce", [&](auto tag) {
      for (bool wide : {false, true})
        FC_CUDA_CHECK(cudaFuncSetAttribute(productionKernel<decltype(tag)>(dc.nranks, wide),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, int(dc.soloSmemBytes)));
      return fcSuccess;
    }));
  }
  return fcSuccess;
}

fcResult_t launchAllReduceLamport(const DeviceComm& dc, int channel, const void* sendbuff,
                                  void* recvbuff, size_t count, fcDataType_t datatype, bool pdl,
                                  cudaStream_t stream, uint32_t stages, uint32_t callerSig) {
  const uint32_t sig = callerSig != 0 ? callerSig : opSignature(Op::AllReduceOneShot, uint32_t(datatype), count);
  return withElementType(datatype, "Lamport all-reduce", [&](auto tag) {
    return launch<decltype(tag)>(dc, channel, sendbuff, recvbuff, count, sig, pdl, stages, stream);
  });
}

}  // namespace fc
