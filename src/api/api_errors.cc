// Entry points that need no communicator and no GPU: errors, version, unique id.
#include "api/api.h"
#include "bootstrap/unique_id.h"

FC_API const char* fcGetErrorString(fcResult_t result) {
  switch (result) {
    case fcSuccess: return "no error";
    case fcUnhandledCudaError: return "unhandled cuda error (run with FC_DEBUG=WARN for details)";
    case fcSystemError: return "unhandled system error (run with FC_DEBUG=WARN for details)";
    case fcInternalError: return "internal error - please report this issue";
    case fcInvalidArgument: return "invalid argument (run with FC_DEBUG=WARN for details)";
    case fcInvalidUsage: return "invalid usage (run with FC_DEBUG=WARN for details)";
    case fcRemoteError: return "remote process exited or there was a network error";
    case fcInProgress: return "operation in progress";
    case fcTimeout: return "timed out waiting for a peer";
    case fcNotSupported: return "not supported on this hardware or build";
    default: return "unknown result code";
  }
}

FC_API const char* fcGetLastError(fcComm_t) { return fc::lastError(); }

FC_API fcResult_t fcGetVersion(int* version) {
  fc::clearError();
  if (version == nullptr) return fc::setError(fcInvalidArgument, "fcGetVersion: version is NULL");
  *version = FC_VERSION_CODE;
  return fcSuccess;
}

FC_API fcResult_t fcGetUniqueId(fcUniqueId* uniqueId) {
  fc::clearError();
  if (uniqueId == nullptr) return fc::setError(fcInvalidArgument, "fcGetUniqueId: uniqueId is NULL");
  return fc::makeUniqueId(uniqueId);
}
