#include "comm/comm.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/launch.h"
#include "core/driver.h"
#include "core/env.h"
#include "core/log.h"
#include "core/preload.h"
#include "core/result.h"
#include "fused/fused.h"

namespace fc {
namespace {

// What every rank tells the others at init, to catch misconfiguration early.
struct RankInfo {
  int32_t pid;
  int32_t cudaDev;
  uint64_t workspaceBytes;
  uint64_t timeoutMs;
  int32_t maxCtas;
  int32_t channels;
  int32_t shareGpu;    // FC_SHARE_GPU: ranks may share a GPU (tests on one GPU)
  int32_t gatherSet;   // FC_ARNORM_GATHER_SET: the heap's layout
  int32_t passAlign;   // FC_ARNORM_PASS_ALIGN: the two-shot norm's passes
  char busId[32];      // PCI bus id of the GPU: two ranks must not share one
};

const char* opName(uint32_t op) {
  switch (Op(op)) {
    case Op::AllReduceOneShot: return "fcAllReduceOneShot or fcAllReduce(one-shot)";
    case Op::Barrier: return "fcBarrier";
    case Op::AllReduceTwoShot: return "fcAllReduce(two-shot)";
    case Op::ReduceScatter: return "fcReduceScatter";
    case Op::AllGather: return "fcAllGather";
    case Op::ReduceScatterCe: return "fcReduceScatter(copy engine)";
    case Op::AllGatherCe: return "fcAllGather(copy engine)";
    case Op::AllGatherMatmul: return "fcAllGatherMatmul";
    case Op::MatmulReduceScatter: return "fcMatmulReduceScatter";
    case Op::AllReduceNorm: return "fcAllReduceResidualRMSNorm";
    case Op::MatmulAllReduce: return "fcMatmulAllReduce";
    default: return "unknown op";
  }
}

// Restore the caller's current device on scope exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int dev) {
    if (cudaGetDevice(&saved_) == cudaSuccess && saved_ != dev) cudaSetDevice(dev);
  }
  ~DeviceGuard() {
    if (saved_ >= 0) cudaSetDevice(saved_);
  }

 private:
  int saved_ = -1;
};

fcResult_t validateRanks(const std::vector<RankInfo>& all, int rank) {
  const RankInfo& me = all[size_t(rank)];
  for (size_t r = 0; r < all.size(); ++r) {
    const RankInfo& o = all[r];
    if (o.workspaceBytes != me.workspaceBytes)
      return setError(fcInvalidUsage,
                      "rank %zu uses a workspace of %llu bytes, this rank %llu: set FC_WORKSPACE_BYTES "
                      "the same on every rank",
                      r, (unsigned long long)o.workspaceBytes, (unsigned long long)me.workspaceBytes);
    if (o.maxCtas != me.maxCtas || o.channels != me.channels)
      return setError(fcInvalidUsage,
                      "rank %zu uses maxCtas %d and %d channels, this rank %d and %d: every rank "
                      "must configure them the same",
                      r, o.maxCtas, o.channels, me.maxCtas, me.channels);
    if (o.timeoutMs != me.timeoutMs)
      log(LogLevel::Warn, "rank %zu uses FC_TIMEOUT_MS=%llu, this rank %llu", r,
          (unsigned long long)o.timeoutMs, (unsigned long long)me.timeoutMs);
    if (o.gatherSet != me.gatherSet)
      return setError(fcInvalidUsage, "rank %zu sets FC_ARNORM_GATHER_SET=%d, this rank %d: set it the same "
                      "on every rank (it changes the symmetric heap's layout)", r, o.gatherSet, me.gatherSet);
    if (o.passAlign != me.passAlign)
      return setError(fcInvalidUsage, "rank %zu sets FC_ARNORM_PASS_ALIGN=%d, this rank %d: set it the same "
                      "on every rank (it changes the two-shot norm's passes)", r, o.passAlign, me.passAlign);
    if (o.shareGpu != me.shareGpu)
      return setError(fcInvalidUsage, "rank %zu sets FC_SHARE_GPU=%d, this rank %d: set it the same "
                      "on every rank", r, o.shareGpu, me.shareGpu);
    if (r != size_t(rank) && !me.shareGpu && strcmp(o.busId, me.busId) == 0)
      return setError(fcInvalidUsage, "ranks %d and %zu both use GPU %s: one GPU per rank "
                      "(FC_SHARE_GPU=1 allows sharing, for functional tests only)", rank, r,
                      me.busId);
  }
  return fcSuccess;
}

fcResult_t checkDevice(int* cudaDev, CUdevice* cuDev) {
  FC_CHECK(driverLoad());
  cudaError_t err = cudaGetDevice(cudaDev);
  if (err == cudaSuccess) err = cudaFree(nullptr);  // create/attach the primary context now
  if (err != cudaSuccess)
    return setError(fcUnhandledCudaError, "no usable CUDA device: %s (%s)", cudaGetErrorString(err),
                    cudaGetErrorName(err));
  FC_CU_CHECK(cuDeviceGet(cuDev, *cudaDev));
  int vmm = 0, fd = 0;
  FC_CU_CHECK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, *cuDev));
  FC_CU_CHECK(cuDeviceGetAttribute(&fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, *cuDev));
  if (!vmm || !fd)
    return setError(fcNotSupported, "GPU %d lacks CUDA VMM (%d) or POSIX-fd memory handles (%d)",
                    *cudaDev, vmm, fd);
  return fcSuccess;
}

}  // namespace

fcResult_t commInit(fcComm* comm, const UniqueIdBody& id, const CommParams& params) {
  const int rank = comm->rank, nranks = comm->nranks;
  setLogRank(rank);
  comm->params = params;
  if (params.lamportMaxBytes > lamportSlotBytes(nranks))
    return setError(fcInvalidArgument, "FC_LAMPORT_MAX_BYTES=%llu exceeds the push slot at %d ranks (%zu bytes)",
                    (unsigned long long)params.lamportMaxBytes, nranks, lamportSlotBytes(nranks));
  CUdevice cuDev;
  FC_CHECK(checkDevice(&comm->cudaDev, &cuDev));
  FC_CHECK(preloadKernels());
  FC_CUDA_CHECK(cudaDeviceGetAttribute(&comm->smCount, cudaDevAttrMultiProcessorCount, comm->cudaDev));

  // The rendezvous, and the refusal of ranks on several hosts (before any cuMem work).
  FC_CHECK(Bootstrap::create(id, rank, nranks, params.timeoutMs, &comm->bootstrap));

  RankInfo mine{};
  mine.pid = int32_t(getpid());
  mine.cudaDev = comm->cudaDev;
  mine.workspaceBytes = params.workspaceBytes;
  mine.timeoutMs = params.timeoutMs;
  mine.maxCtas = params.maxCtas;
  mine.channels = params.channels;
  mine.shareGpu = params.shareGpu ? 1 : 0;
  mine.gatherSet = params.normGatherSet ? 1 : 0;
  mine.passAlign = params.normPassAlign ? 1 : 0;
  FC_CUDA_CHECK(cudaDeviceGetPCIBusId(mine.busId, sizeof mine.busId, comm->cudaDev));
  std::vector<RankInfo> all(static_cast<size_t>(nranks));
  FC_CHECK(comm->bootstrap->allGather(&mine, all.data(), sizeof mine));
  FC_CHECK(validateRanks(all, rank));

  // Zero the signal region and mark the Lamport buffers empty before the allocation
  // is exported: a peer may write into it as soon as it has mapped it, and must
  // never meet stale flags or stale data.
  const size_t gatherBytes = params.normGatherSet ? size_t(params.channels) * lamportGatherBytes(nranks) : 0;
  const size_t lamportBytes = size_t(params.channels) * lamportChannelBytes(nranks) + gatherBytes;
  auto initSignals = [lamportBytes](void* local, size_t) -> fcResult_t {
    FC_CUDA_CHECK(cudaMemset(local, 0, kSignalBytes));
    FC_CUDA_CHECK(cudaMemset(static_cast<char*>(local) + kSignalBytes, 0xff, lamportBytes));
    FC_CUDA_CHECK(cudaDeviceSynchronize());
    return fcSuccess;
  };
  const size_t heapBytes = kSignalBytes + lamportBytes + size_t(params.channels) * params.workspaceBytes;
  FC_CHECK(SymmetricHeap::create(*comm->bootstrap, cuDev, heapBytes, initSignals, &comm->heap));

  FC_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&comm->errorHost), sizeof(ErrorRecord),
                              cudaHostAllocMapped | cudaHostAllocPortable));
  memset(comm->errorHost, 0, sizeof(ErrorRecord));
  ErrorRecord* errorDev = nullptr;
  FC_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&errorDev), comm->errorHost, 0));
  FC_CUDA_CHECK(cudaStreamCreateWithFlags(&comm->control, cudaStreamNonBlocking));
  // Copy-engine transfers run on one internal stream per channel, one at a time,
  // peers in rotated order: W-1 concurrent transfers per rank (one stream each)
  // moved 30-40 % less on 4 x H200 (docs/perf-log.md).
  for (int c = 0; c < params.channels; ++c) {
    comm->copies.push_back(std::make_unique<CopyQueue>());
    FC_CHECK(comm->copies.back()->init());
    comm->gemms.push_back(std::make_unique<Gemm>());
    FC_CHECK(comm->gemms.back()->init(params.decodeGemm));
    comm->scratch.push_back(std::make_unique<Scratch>());
    if (params.scratchBytes > 0) FC_CHECK(comm->scratch.back()->grow(params.scratchBytes));
  }
  for (cudaEvent_t* e : {&comm->lastEager.done, &comm->lastCaptured.done, &comm->captureStart})
    FC_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));

  comm->dev.base = comm->heap->base();
  comm->dev.stride = comm->heap->stride();
  comm->dev.rank = rank;
  comm->dev.nranks = nranks;
  comm->dev.lamportOffset = kSignalBytes;
  comm->dev.rowsGatherOffset = gatherBytes ? kSignalBytes + lamportBytes - gatherBytes : 0;
  comm->dev.workspaceOffset = kSignalBytes + lamportBytes;
  comm->dev.workspaceBytes = params.workspaceBytes;
  comm->dev.maxCtas = params.maxCtas;
  comm->dev.lamportSpins = params.lamportSpins;
  comm->dev.lamportSpinsSet = params.lamportSpinsSet ? 1u : 0u;
  comm->dev.timeoutNs = params.timeoutMs * 1000000ull;
  comm->dev.error = errorDev;
  // One-shot CTAs alone on their SMs where the tuning says (device_comm.h): never where
  // ranks share a GPU, whose kernels must all be resident at once.
  comm->dev.soloSmemBytes = 0;
  if (!params.shareGpu) FC_CHECK(soloSmemBytes(comm->cudaDev, &comm->dev.soloSmemBytes));
  FC_CHECK(prepareAllReduceLamport(comm->dev));
  FC_CHECK(prepareGemvAllReduce());

  // No rank may signal a peer before that peer has mapped everybody: meet once more.
  FC_CHECK(comm->bootstrap->barrier());

  FC_INFO("libfusedcomm %d.%d.%d: rank %d/%d on cuda device %d (%s); %d channels (%s) x %llu bytes "
          "of workspace, %llu of scratch, max %d CTAs, timeout %llu ms; heap %d x %zu bytes at %p",
          FC_MAJOR, FC_MINOR, FC_PATCH, rank, nranks, comm->cudaDev, mine.busId, params.channels,
          params.channels > 1 ? "eager, captured" : "eager and captured ops share it",
          (unsigned long long)params.workspaceBytes, (unsigned long long)params.scratchBytes, params.maxCtas,
          (unsigned long long)params.timeoutMs, nranks, comm->heap->stride(),
          (void*)comm->heap->base());
  for (int r = 0; r < nranks; ++r)
    FC_INFO("  peer rank %d: pid %d, cuda device %d, bus %s", r, all[size_t(r)].pid,
            all[size_t(r)].cudaDev, all[size_t(r)].busId);
  auto moveName = [](MoveAlgo a) {
    return a == MoveAlgo::Sm           ? "forced SM"
           : a == MoveAlgo::CopyEngine ? "forced copy engine"
           : a == MoveAlgo::Lamport    ? "forced Lamport where it fits"
                                       : "auto";
  };
  FC_INFO("  algorithms: fcAllReduce %s (one-shot up to %zu bytes%s); fcReduceScatter %s (Lamport up to %zu "
          "bytes per rank at <= 4 ranks, copy engine from %zu bytes of input, else SM pull); fcAllGather %s "
          "(copy engine from %zu bytes of output, else SM pull)",
          params.allReduceAlgo == AllReduceAlgo::OneShot      ? "forced one-shot"
          : params.allReduceAlgo == AllReduceAlgo::TwoShot    ? "forced two-shot"
          : params.allReduceAlgo == AllReduceAlgo::LamportTwoShot ? "forced Lamport two-shot"
          : params.allReduceAlgo == AllReduceAlgo::CopyEngine ? "forced copy engine"
                                                              : "auto",
          tuning::oneShotMaxBytes(nranks),
          tuning::lamportTwoShotAuto(nranks) ? ", then the Lamport two-shot"
                   : " or the workspace, then the SM two-shot; copy engine from 64 MiB when count % nranks == 0",
          moveName(params.reduceScatterAlgo), lamportSlotBytes(nranks),
          tuning::ceReduceScatterMinBytes(nranks), moveName(params.allGatherAlgo),
          tuning::ceAllGatherMinBytes(nranks));
  if (params.shareGpu)
    log(LogLevel::Warn, "FC_SHARE_GPU=1: ranks may share a GPU; their kernels time-slice, so "
        "cross-rank waits are slow: use this for functional tests only, never to measure");
  if (!params.checkPointers)
    FC_INFO("  FC_CHECK_POINTERS=0: buffer arguments are not checked to be memory of this GPU");
  return fcSuccess;
}

fcResult_t commDestroy(fcComm* comm, bool abort) {
  if (comm->initThread.joinable()) comm->initThread.join();
  fcResult_t res = fcSuccess;
  if (comm->cudaDev >= 0) {
    DeviceGuard guard(comm->cudaDev);
    if (abort && comm->errorHost != nullptr) {
      // Our spin-waits poll this host word (at least every ~0.1 ms of waiting).
      reinterpret_cast<volatile uint32_t*>(&comm->errorHost->abortFlag)[0] = 1u;
      // Tell every peer's kernels too, through its peer-abort word, so that they
      // fail now with fcRemoteError instead of at their timeout. Best effort: a
      // peer that is gone does not matter.
      if (comm->heap && comm->control) {
        const uint32_t who = uint32_t(comm->rank) + 1u;
        for (int r = 0; r < comm->nranks; ++r)
          if (r != comm->rank)
            cudaMemcpyAsync(comm->heap->peer(r) + kPeerAbortOffset, &who, sizeof who,
                            cudaMemcpyHostToDevice, comm->control);
        cudaStreamSynchronize(comm->control);
      }
    }
    // Our kernels may still run on user streams; they must finish before their
    // memory is unmapped. They cannot hang: every spin-wait has a deadline.
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess && !abort)
      res = setError(fcUnhandledCudaError, "fcCommDestroy: cudaDeviceSynchronize: %s",
                     cudaGetErrorString(err));
    if (comm->control) cudaStreamDestroy(comm->control);
    for (cudaEvent_t e : {comm->lastEager.done, comm->lastCaptured.done, comm->captureStart})
      if (e) cudaEventDestroy(e);
    comm->copies.clear();
    comm->gemms.clear();
    comm->scratch.clear();
    comm->userHeaps.clear();
    comm->heap.reset();
    if (comm->errorHost) cudaFreeHost(comm->errorHost);
  }
  comm->bootstrap.reset();
  comm->magic = 0;
  delete comm;
  return res;
}

fcResult_t commCheckAsync(fcComm* comm) {
  const int state = comm->asyncError.load(std::memory_order_acquire);
  if (state == fcInProgress)
    return setError(fcInProgress, "the communicator's non-blocking init is still running");
  if (state != fcSuccess) return setError(fcResult_t(state), "%s", comm->asyncMessage.c_str());
  const volatile ErrorRecord* e = comm->errorHost;
  if (e == nullptr || e->state != 2u) return fcSuccess;
  __atomic_thread_fence(__ATOMIC_ACQUIRE);  // read the fields after the published state
  const GiveUp why = GiveUp(e->reason);
  char msg[512];
  if (why == GiveUp::Mismatch) {
    // The signatures: op (4 bits), dtype (4 bits), count mod 2^24 (fused ops: a hash
    // of the shape).
    auto describe = [](uint32_t sig, char* out, size_t n) {
      if (isFusedOp(sig >> 28))
        snprintf(out, n, "%s(dtype %u, shape hash 0x%06x)", opName(sig >> 28), (sig >> 24) & 15u, sig & 0xffffffu);
      else
        snprintf(out, n, "%s(dtype %u, count %% 2^24 = %u)", opName(sig >> 28), (sig >> 24) & 15u,
                 sig & 0xffffffu);
    };
    char mine[96], theirs[96];
    describe(e->expected, mine, sizeof mine);
    describe(e->seen, theirs, sizeof theirs);
    snprintf(msg, sizeof msg,
             "mismatched collectives on channel %d: rank %d called %s while rank %d called %s at "
             "the same point; every rank must issue the same operations in the same order; the "
             "communicator is unusable, destroy it",
             e->channel, e->rank, mine, e->peer, theirs);
  } else {
    // Where a peer's give-up ended the wait, e->peer is that peer, not necessarily the one
    // waited for (a GEMM + reduce-scatter chain waits for the next rank while any rank may
    // give up first): the wait is then described without a rank.
    char whose[32], reason[64], waited[96];
    if (why == GiveUp::PeerAbort) {
      snprintf(whose, sizeof whose, "a peer");
      snprintf(reason, sizeof reason, "gave up because rank %d aborted or gave up", e->peer);
    } else {
      snprintf(whose, sizeof whose, "rank %d", e->peer);
      snprintf(reason, sizeof reason, "%s",
               why == GiveUp::Abort ? "was aborted (fcCommAbort)" : "timed out (FC_TIMEOUT_MS)");
    }
    if (WaitKind(e->waitKind) == WaitKind::LamportData)
      snprintf(waited, sizeof waited, "for %s's data in Lamport push buffer %u", whose, e->expected);
    else if (WaitKind(e->waitKind) == WaitKind::Shard)
      snprintf(waited, sizeof waited, "for %s's shard of A to land (copy engine)", whose);
    else if (WaitKind(e->waitKind) == WaitKind::Tiles)
      snprintf(waited, sizeof waited, "for %s's partial tiles, %u of %u stored", whose, e->seen, e->expected);
    else if (WaitKind(e->waitKind) == WaitKind::RowSums)
      snprintf(waited, sizeof waited, "for the other blocks' row sums of squares of call %u, last saw call %u",
               e->expected, e->seen);
    else
      snprintf(waited, sizeof waited, "for %s to reach epoch %u, last saw %u", whose, e->expected, e->seen);
    snprintf(msg, sizeof msg,
             "%s on rank %d %s (block %d, channel %d): waited %s; the communicator is unusable, "
             "destroy it",
             opName(e->op), e->rank, reason, e->block, e->channel, waited);
  }
  comm->asyncMessage = msg;
  const fcResult_t res = why == GiveUp::Timeout    ? fcTimeout
                        : why == GiveUp::Mismatch ? fcInvalidUsage
                                                  : fcRemoteError;
  comm->asyncError.store(res, std::memory_order_release);
  return setError(res, "%s", msg);
}

fcResult_t commMemAlloc(fcComm* comm, size_t bytes, void** ptr) {
  CUdevice cuDev;
  FC_CU_CHECK(cuDeviceGet(&cuDev, comm->cudaDev));
  auto zero = [](void* local, size_t n) -> fcResult_t {
    FC_CUDA_CHECK(cudaMemset(local, 0, n));
    FC_CUDA_CHECK(cudaDeviceSynchronize());
    return fcSuccess;
  };
  std::unique_ptr<SymmetricHeap> h;
  FC_CHECK(SymmetricHeap::create(*comm->bootstrap, cuDev, bytes, zero, &h));
  *ptr = h->local();
  FC_INFO("fcMemAlloc: %zu bytes (%zu mapped per rank) at %p", bytes, h->stride(), *ptr);
  comm->userHeaps.push_back({comm->userHeapsMade++, std::move(h)});
  return fcSuccess;
}

fcResult_t commMemFree(fcComm* comm, void* ptr) {
  for (auto it = comm->userHeaps.begin(); it != comm->userHeaps.end(); ++it) {
    if (it->heap->local() != ptr) continue;
    // Kernels of ours may still read it (or peers' kernels through our mapping).
    FC_CUDA_CHECK(cudaDeviceSynchronize());
    comm->userHeaps.erase(it);
    return fcSuccess;
  }
  return setError(fcInvalidArgument, "fcMemFree: %p was not returned by fcMemAlloc of this communicator",
                  ptr);
}

bool commSymmetricSource(const fcComm* comm, const void* p, size_t bytes, SymSource* src, uint64_t* serial) {
  for (const auto& u : comm->userHeaps)
    if (u.heap->containsLocal(p, bytes)) {
      src->base = u.heap->base();
      src->stride = u.heap->stride();
      src->offset = uint64_t(static_cast<const char*>(p) - u.heap->local());
      if (serial != nullptr) *serial = u.serial;
      return true;
    }
  return false;
}

}  // namespace fc
