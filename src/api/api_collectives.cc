// Collective entry points: validate, then hand over to src/collectives.
#include "api/api.h"
#include "collectives/collectives.h"

namespace {

// Checks shared by every collective; on success *elemSize is sizeof(datatype).
// `maxBytes(bytes)` is the op's workspace need, checked against the communicator's.
template <typename Need>
fcResult_t checkCollective(fcComm_t comm, const void* sendbuff, const void* recvbuff, size_t count,
                           fcDataType_t datatype, fcRedOp_t op, const char* fn, Need need,
                           size_t* elemSize) {
  FC_CHECK(fc::checkComm(comm, fn));
  *elemSize = fc::dataTypeSize(datatype);
  if (*elemSize == 0)
    return fc::setError(fcInvalidArgument, "%s: unknown datatype %d (fcFloat16, fcFloat32, fcBfloat16)",
                        fn, int(datatype));
  if (op != fcSum) return fc::setError(fcInvalidArgument, "%s: unsupported op %d (fcSum)", fn, int(op));
  if (count == 0) return fcSuccess;
  if (sendbuff == nullptr || recvbuff == nullptr)
    return fc::setError(fcInvalidArgument, "%s: %s is NULL", fn, sendbuff ? "recvbuff" : "sendbuff");
  if (count > SIZE_MAX / *elemSize)
    return fc::setError(fcInvalidArgument, "%s: count %zu overflows", fn, count);
  if (need(count * *elemSize) > comm->workspaceBytes)
    return fc::setError(fcInvalidArgument,
                        "%s: %zu elements (%zu bytes) exceed the workspace of %llu bytes; the limit "
                        "is %llu elements of this type (raise FC_WORKSPACE_BYTES)",
                        fn, count, count * *elemSize, (unsigned long long)comm->workspaceBytes,
                        (unsigned long long)(comm->workspaceBytes / *elemSize));
  if ((reinterpret_cast<uintptr_t>(sendbuff) | reinterpret_cast<uintptr_t>(recvbuff)) % *elemSize)
    return fc::setError(fcInvalidArgument, "%s: buffers must be aligned to the element size (%zu)", fn,
                        *elemSize);
  const uintptr_t s = reinterpret_cast<uintptr_t>(sendbuff), r = reinterpret_cast<uintptr_t>(recvbuff);
  const size_t bytes = count * *elemSize;
  if (s != r && s < r + bytes && r < s + bytes)
    return fc::setError(fcInvalidArgument, "%s: sendbuff and recvbuff overlap without being equal", fn);
  int dev = -1;
  FC_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev != comm->cudaDev)
    return fc::setError(fcInvalidUsage, "%s: current device is %d, the communicator's is %d", fn, dev,
                        comm->cudaDev);
  return fc::commCheckAsync(comm);
}

}  // namespace

FC_API fcResult_t fcAllReduceOneShot(const void* sendbuff, void* recvbuff, size_t count,
                                     fcDataType_t datatype, fcRedOp_t op, fcComm_t comm,
                                     cudaStream_t stream) {
  fc::clearError();
  size_t elem;
  FC_CHECK(checkCollective(comm, sendbuff, recvbuff, count, datatype, op, "fcAllReduceOneShot",
                           fc::allReduceOneShotWorkspace, &elem));
  if (count == 0) return fcSuccess;
  return fc::launchAllReduceOneShot(comm->dev, 0, sendbuff, recvbuff, count, datatype, stream);
}
