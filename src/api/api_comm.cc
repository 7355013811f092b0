// Communicator lifecycle and queries: destroy, abort, async error, getters.
#include "api/api.h"

namespace {

// A communicator whose non-blocking init has finished successfully.
fcResult_t checkReady(fcComm* comm, const char* fn) {
  FC_CHECK(fc::checkComm(comm, fn));
  if (comm->asyncError.load(std::memory_order_acquire) == fcInProgress)
    return fc::setError(fcInProgress, "%s: the non-blocking init is still running", fn);
  return fcSuccess;
}

}  // namespace

FC_API fcResult_t fcCommDestroy(fcComm_t comm) {
  fc::clearError();
  FC_CHECK(fc::checkComm(comm, "fcCommDestroy"));
  return fc::commDestroy(comm, false);
}

FC_API fcResult_t fcCommAbort(fcComm_t comm) {
  fc::clearError();
  FC_CHECK(fc::checkComm(comm, "fcCommAbort"));
  return fc::commDestroy(comm, true);
}

FC_API fcResult_t fcCommGetAsyncError(fcComm_t comm, fcResult_t* asyncError) {
  fc::clearError();
  FC_CHECK(fc::checkComm(comm, "fcCommGetAsyncError"));
  if (asyncError == nullptr)
    return fc::setError(fcInvalidArgument, "fcCommGetAsyncError: asyncError is NULL");
  *asyncError = fc::commCheckAsync(comm);
  return fcSuccess;
}

FC_API fcResult_t fcCommCount(const fcComm_t comm, int* count) {
  fc::clearError();
  FC_CHECK(checkReady(comm, "fcCommCount"));
  if (count == nullptr) return fc::setError(fcInvalidArgument, "fcCommCount: count is NULL");
  *count = comm->nranks;
  return fcSuccess;
}

FC_API fcResult_t fcCommUserRank(const fcComm_t comm, int* rank) {
  fc::clearError();
  FC_CHECK(checkReady(comm, "fcCommUserRank"));
  if (rank == nullptr) return fc::setError(fcInvalidArgument, "fcCommUserRank: rank is NULL");
  *rank = comm->rank;
  return fcSuccess;
}

FC_API fcResult_t fcCommCuDevice(const fcComm_t comm, int* device) {
  fc::clearError();
  FC_CHECK(checkReady(comm, "fcCommCuDevice"));
  if (device == nullptr) return fc::setError(fcInvalidArgument, "fcCommCuDevice: device is NULL");
  *device = comm->cudaDev;
  return fcSuccess;
}
