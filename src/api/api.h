// Shared by the fc* entry points: export macro and argument checks.
#pragma once

#include "comm/comm.h"
#include "core/datatype.h"
#include "core/log.h"
#include "core/result.h"
#include "fusedcomm.h"

#define FC_API extern "C" __attribute__((visibility("default")))

namespace fc {

// A live communicator (best effort: catches NULL and most uses after destroy).
inline fcResult_t checkComm(const fcComm* comm, const char* fn) {
  if (comm == nullptr) return setError(fcInvalidArgument, "%s: comm is NULL", fn);
  if (comm->magic != fcComm::kAlive)
    return setError(fcInvalidArgument, "%s: comm is not a live communicator (destroyed?)", fn);
  setLogRank(comm->rank);
  return fcSuccess;
}

}  // namespace fc
