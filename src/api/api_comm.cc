// Communicator lifecycle entry points.
#include "api/api.h"
#include "bootstrap/unique_id.h"

FC_API fcResult_t fcCommInitRank(fcComm_t* comm, int nranks, fcUniqueId id, int rank) {
  fc::clearError();
  if (comm == nullptr) return fc::setError(fcInvalidArgument, "fcCommInitRank: comm is NULL");
  *comm = nullptr;
  if (nranks < 1 || nranks > fc::kMaxRanks)
    return fc::setError(fcInvalidArgument, "fcCommInitRank: nranks %d is not in [1, %d]", nranks,
                        fc::kMaxRanks);
  if (rank < 0 || rank >= nranks)
    return fc::setError(fcInvalidArgument, "fcCommInitRank: rank %d is not in [0, %d)", rank, nranks);
  fc::UniqueIdBody body;
  FC_CHECK(fc::parseUniqueId(id, &body));
  fc::CommParams params;
  FC_CHECK(fc::commParamsFromEnv(&params));
  fcResult_t res = fc::commCreate(body, nranks, rank, params, comm);
  if (res != fcSuccess) fc::addContext(res, "fcCommInitRank(rank %d of %d)", rank, nranks);
  return res;
}

FC_API fcResult_t fcCommDestroy(fcComm_t comm) {
  fc::clearError();
  FC_CHECK(fc::checkComm(comm, "fcCommDestroy"));
  return fc::commDestroy(comm);
}

FC_API fcResult_t fcCommCount(const fcComm_t comm, int* count) {
  fc::clearError();
  FC_CHECK(fc::checkComm(comm, "fcCommCount"));
  if (count == nullptr) return fc::setError(fcInvalidArgument, "fcCommCount: count is NULL");
  *count = comm->nranks;
  return fcSuccess;
}

FC_API fcResult_t fcCommUserRank(const fcComm_t comm, int* rank) {
  fc::clearError();
  FC_CHECK(fc::checkComm(comm, "fcCommUserRank"));
  if (rank == nullptr) return fc::setError(fcInvalidArgument, "fcCommUserRank: rank is NULL");
  *rank = comm->rank;
  return fcSuccess;
}

FC_API fcResult_t fcCommCuDevice(const fcComm_t comm, int* device) {
  fc::clearError();
  FC_CHECK(fc::checkComm(comm, "fcCommCuDevice"));
  if (device == nullptr) return fc::setError(fcInvalidArgument, "fcCommCuDevice: device is NULL");
  *device = comm->cudaDev;
  return fcSuccess;
}
