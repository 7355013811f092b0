// Communicator creation: fcCommInitRank, fcCommInitRankConfig (blocking or not),
// fcCommInitAll (several GPUs of one process).
#include <thread>
#include <vector>

#include "api/api.h"
#include "bootstrap/unique_id.h"

namespace {

// Validate, then create `*out` collectively; on failure *out is NULL.
fcResult_t initRank(fcComm_t* out, int nranks, const fcUniqueId& id, int rank,
                    const fcConfig_t* config) {
  if (out == nullptr) return fc::setError(fcInvalidArgument, "comm is NULL");
  *out = nullptr;
  if (nranks < 1 || nranks > fc::kMaxRanks)
    return fc::setError(fcInvalidArgument, "nranks %d is not in [1, %d]", nranks, fc::kMaxRanks);
  if (rank < 0 || rank >= nranks)
    return fc::setError(fcInvalidArgument, "rank %d is not in [0, %d)", rank, nranks);
  fc::UniqueIdBody body;
  FC_CHECK(fc::parseUniqueId(id, &body));
  fc::CommParams params;
  FC_CHECK(fc::commParamsResolve(config, &params));

  fcComm* comm = new fcComm;
  comm->rank = rank;
  comm->nranks = nranks;
  if (!params.blocking) {
    // The handle exists at once; the set-up runs on a thread of ours on the
    // caller's device, and fcCommGetAsyncError reports fcInProgress until it ends.
    int dev = 0;
    cudaGetDevice(&dev);  // an error here resurfaces in the thread's own check
    comm->asyncError.store(fcInProgress, std::memory_order_relaxed);
    comm->initThread = std::thread([comm, body, params, dev] {
      cudaSetDevice(dev);
      fcResult_t res = fc::commInit(comm, body, params);
      if (res != fcSuccess) comm->asyncMessage = fc::lastError();
      comm->asyncError.store(res, std::memory_order_release);
    });
    *out = comm;
    return fc::setError(fcInProgress, "non-blocking init started: poll fcCommGetAsyncError");
  }
  fcResult_t res = fc::commInit(comm, body, params);
  if (res != fcSuccess) {
    std::string msg = fc::lastError();
    fc::commDestroy(comm, false);
    return fc::setError(res, "%s", msg.c_str());
  }
  *out = comm;
  return fcSuccess;
}

}  // namespace

FC_API fcResult_t fcCommInitRank(fcComm_t* comm, int nranks, fcUniqueId id, int rank) {
  fc::clearError();
  fcResult_t res = initRank(comm, nranks, id, rank, nullptr);
  if (res != fcSuccess) fc::addContext(res, "fcCommInitRank(rank %d of %d)", rank, nranks);
  return res;
}

FC_API fcResult_t fcCommInitRankConfig(fcComm_t* comm, int nranks, fcUniqueId id, int rank,
                                       fcConfig_t* config) {
  fc::clearError();
  fcResult_t res = initRank(comm, nranks, id, rank, config);
  if (res != fcSuccess && res != fcInProgress)
    fc::addContext(res, "fcCommInitRankConfig(rank %d of %d)", rank, nranks);
  return res;
}

FC_API fcResult_t fcCommInitAll(fcComm_t* comms, int ndev, const int* devlist) {
  fc::clearError();
  if (comms == nullptr) return fc::setError(fcInvalidArgument, "fcCommInitAll: comms is NULL");
  if (ndev < 1 || ndev > fc::kMaxRanks)
    return fc::setError(fcInvalidArgument, "fcCommInitAll: ndev %d is not in [1, %d]", ndev,
                        fc::kMaxRanks);
  for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
  int visible = 0;
  FC_CUDA_CHECK(cudaGetDeviceCount(&visible));
  // FC_SHARE_GPU=1 (functional tests on one GPU) lets a device carry several ranks.
  fc::CommParams params;
  FC_CHECK(fc::commParamsResolve(nullptr, &params));
  std::vector<int> devs(static_cast<size_t>(ndev));
  for (int i = 0; i < ndev; ++i) {
    devs[size_t(i)] = devlist ? devlist[i] : i;
    if (devs[size_t(i)] < 0 || devs[size_t(i)] >= visible)
      return fc::setError(fcInvalidArgument, "fcCommInitAll: device %d is not in [0, %d)",
                          devs[size_t(i)], visible);
    for (int j = 0; j < i && !params.shareGpu; ++j)
      if (devs[size_t(j)] == devs[size_t(i)])
        return fc::setError(fcInvalidArgument, "fcCommInitAll: device %d is listed twice",
                            devs[size_t(i)]);
  }
  fcUniqueId id;
  FC_CHECK(fc::makeUniqueId(&id));
  // One thread per rank: the rendezvous needs them all at once.
  std::vector<fcResult_t> results(static_cast<size_t>(ndev), fcSuccess);
  std::vector<std::string> messages(static_cast<size_t>(ndev));
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i)
    threads.emplace_back([&, i] {
      cudaError_t err = cudaSetDevice(devs[size_t(i)]);
      results[size_t(i)] = err != cudaSuccess
                               ? fc::setError(fcUnhandledCudaError, "cudaSetDevice(%d): %s",
                                              devs[size_t(i)], cudaGetErrorString(err))
                               : initRank(&comms[i], ndev, id, i, nullptr);
      messages[size_t(i)] = fc::lastError();
    });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < ndev; ++i) {
    if (results[size_t(i)] == fcSuccess) continue;
    for (int j = 0; j < ndev; ++j)
      if (comms[j] != nullptr) fc::commDestroy(comms[j], true), comms[j] = nullptr;
    return fc::setError(results[size_t(i)], "fcCommInitAll: rank %d (device %d): %s", i,
                        devs[size_t(i)], messages[size_t(i)].c_str());
  }
  return fcSuccess;
}
