#include "comm/comm.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/driver.h"
#include "core/env.h"
#include "core/log.h"
#include "core/result.h"

namespace fc {
namespace {

// What every rank tells the others at init, to catch misconfiguration early.
struct RankInfo {
  int32_t pid;
  int32_t cudaDev;
  uint64_t hostHash;   // hostname + boot id: all ranks must be on this node
  uint64_t workspaceBytes;
  uint64_t timeoutMs;
  char busId[32];      // PCI bus id of the GPU: two ranks must not share one
};

uint64_t hostHash() {
  char buf[256] = {0};
  gethostname(buf, 128);
  if (FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r")) {
    size_t n = strlen(buf);
    if (fgets(buf + n, int(sizeof buf - n), f) == nullptr) buf[n] = '\0';
    fclose(f);
  }
  uint64_t h = 1469598103934665603ull;
  for (const char* p = buf; *p; ++p) h = (h ^ uint8_t(*p)) * 1099511628211ull;
  return h;
}

const char* opName(uint32_t op) {
  switch (Op(op)) {
    case Op::AllReduceOneShot: return "fcAllReduceOneShot";
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
    if (o.hostHash != me.hostHash)
      return setError(fcInvalidUsage, "rank %zu runs on another node: libfusedcomm is intra-node only", r);
    if (o.workspaceBytes != me.workspaceBytes)
      return setError(fcInvalidUsage,
                      "rank %zu uses a workspace of %llu bytes, this rank %llu: set FC_WORKSPACE_BYTES "
                      "the same on every rank",
                      r, (unsigned long long)o.workspaceBytes, (unsigned long long)me.workspaceBytes);
    if (o.timeoutMs != me.timeoutMs)
      log(LogLevel::Warn, "rank %zu uses FC_TIMEOUT_MS=%llu, this rank %llu", r,
          (unsigned long long)o.timeoutMs, (unsigned long long)me.timeoutMs);
    if (r != size_t(rank) && strcmp(o.busId, me.busId) == 0)
      return setError(fcInvalidUsage, "ranks %d and %zu both use GPU %s: one GPU per rank", rank, r,
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

fcResult_t commParamsFromEnv(CommParams* params) {
  FC_CHECK(envU64("FC_TIMEOUT_MS", 120000, &params->timeoutMs));
  FC_CHECK(envU64("FC_WORKSPACE_BYTES", 64ull << 20, &params->workspaceBytes));
  if (params->timeoutMs == 0) return setError(fcInvalidArgument, "FC_TIMEOUT_MS must be > 0");
  if (params->workspaceBytes == 0) return setError(fcInvalidArgument, "FC_WORKSPACE_BYTES must be > 0");
  return fcSuccess;
}

fcResult_t commCreate(const UniqueIdBody& id, int nranks, int rank, const CommParams& params,
                      fcComm** out) {
  setLogRank(rank);
  std::unique_ptr<fcComm> comm(new fcComm);
  comm->rank = rank;
  comm->nranks = nranks;
  comm->timeoutMs = params.timeoutMs;
  comm->workspaceBytes = (params.workspaceBytes + 15) / 16 * 16;
  CUdevice cuDev;
  FC_CHECK(checkDevice(&comm->cudaDev, &cuDev));

  FC_CHECK(Bootstrap::create(id, rank, nranks, params.timeoutMs, &comm->bootstrap));

  RankInfo mine{};
  mine.pid = int32_t(getpid());
  mine.cudaDev = comm->cudaDev;
  mine.hostHash = hostHash();
  mine.workspaceBytes = comm->workspaceBytes;
  mine.timeoutMs = comm->timeoutMs;
  FC_CUDA_CHECK(cudaDeviceGetPCIBusId(mine.busId, sizeof mine.busId, comm->cudaDev));
  std::vector<RankInfo> all(static_cast<size_t>(nranks));
  FC_CHECK(comm->bootstrap->allGather(&mine, all.data(), sizeof mine));
  FC_CHECK(validateRanks(all, rank));

  // Zero the signal region before the allocation is exported: a peer may signal
  // into it as soon as it has mapped it, and must never see stale flags.
  auto zeroSignals = [](void* local, size_t) -> fcResult_t {
    FC_CUDA_CHECK(cudaMemset(local, 0, kSignalBytes));
    FC_CUDA_CHECK(cudaDeviceSynchronize());
    return fcSuccess;
  };
  FC_CHECK(SymmetricHeap::create(*comm->bootstrap, cuDev, kSignalBytes + comm->workspaceBytes,
                                 zeroSignals, &comm->heap));

  FC_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&comm->errorHost), sizeof(ErrorRecord),
                              cudaHostAllocMapped | cudaHostAllocPortable));
  memset(comm->errorHost, 0, sizeof(ErrorRecord));
  ErrorRecord* errorDev = nullptr;
  FC_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&errorDev), comm->errorHost, 0));

  comm->dev.base = comm->heap->base();
  comm->dev.stride = comm->heap->stride();
  comm->dev.rank = rank;
  comm->dev.nranks = nranks;
  comm->dev.workspaceBytes = comm->workspaceBytes;
  comm->dev.timeoutNs = params.timeoutMs * 1000000ull;
  comm->dev.error = errorDev;

  // No rank may signal a peer before that peer has mapped everybody: meet once more.
  FC_CHECK(comm->bootstrap->barrier());

  FC_INFO("libfusedcomm %d.%d.%d: rank %d/%d on cuda device %d (%s), workspace %llu bytes, "
          "timeout %llu ms, heap %d x %zu bytes at %p",
          FC_MAJOR, FC_MINOR, FC_PATCH, rank, nranks, comm->cudaDev, mine.busId,
          (unsigned long long)comm->workspaceBytes, (unsigned long long)comm->timeoutMs, nranks,
          comm->heap->stride(), (void*)comm->heap->base());
  for (int r = 0; r < nranks; ++r)
    FC_INFO("  peer rank %d: pid %d, cuda device %d, bus %s", r, all[size_t(r)].pid,
            all[size_t(r)].cudaDev, all[size_t(r)].busId);
  *out = comm.release();
  return fcSuccess;
}

fcResult_t commDestroy(fcComm* comm) {
  fcResult_t res = fcSuccess;
  {
    DeviceGuard guard(comm->cudaDev);
    // Our kernels may still run on user streams; they must finish before their
    // memory is unmapped. They cannot hang: every spin-wait has a deadline.
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess)
      res = setError(fcUnhandledCudaError, "fcCommDestroy: cudaDeviceSynchronize: %s",
                     cudaGetErrorString(err));
    comm->heap.reset();
    if (comm->errorHost) cudaFreeHost(comm->errorHost);
  }
  comm->bootstrap.reset();
  comm->magic = 0;
  delete comm;
  return res;
}

fcResult_t commCheckAsync(fcComm* comm) {
  if (comm->asyncError != fcSuccess)
    return setError(comm->asyncError, "%s", comm->asyncMessage.c_str());
  const volatile ErrorRecord* e = comm->errorHost;
  if (e->state != 2u) return fcSuccess;
  __atomic_thread_fence(__ATOMIC_ACQUIRE);  // read the fields after the published state
  char msg[512];
  snprintf(msg, sizeof msg,
           "%s on rank %d %s (block %d, channel %d): waited for peer rank %d to reach epoch %u, "
           "last saw %u; the communicator is unusable, destroy it",
           opName(e->op), e->rank, e->reason == 2u ? "was aborted" : "timed out (FC_TIMEOUT_MS)",
           e->block, e->channel, e->peer, e->expected, e->seen);
  comm->asyncError = e->reason == 2u ? fcRemoteError : fcTimeout;
  comm->asyncMessage = msg;
  return setError(comm->asyncError, "%s", msg);
}

}  // namespace fc
