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
  if (need(count * *elemSize) > comm->params.workspaceBytes)
    return fc::setError(fcInvalidArgument,
                        "%s: %zu elements (%zu bytes) exceed the workspace of %llu bytes; the limit "
                        "is %llu elements of this type (raise FC_WORKSPACE_BYTES)",
                        fn, count, count * *elemSize, (unsigned long long)comm->params.workspaceBytes,
                        (unsigned long long)(comm->params.workspaceBytes / *elemSize));
  if ((reinterpret_cast<uintptr_t>(sendbuff) | reinterpret_cast<uintptr_t>(recvbuff)) % *elemSize)
    return fc::setError(fcInvalidArgument, "%s: buffers must be aligned to the element size (%zu)", fn,
                        *elemSize);
  const uintptr_t s = reinterpret_cast<uintptr_t>(sendbuff), r = reinterpret_cast<uintptr_t>(recvbuff);
  const size_t bytes = count * *elemSize;
  if (s != r && s < r + bytes && r < s + bytes)
    return fc::setError(fcInvalidArgument, "%s: sendbuff and recvbuff overlap without being equal", fn);
  return fcSuccess;
}

// The checks every op makes before it enqueues: the communicator is healthy, the
// current device and the stream's device are the communicator's; *channel is the
// stream's channel.
fcResult_t checkLaunch(fcComm_t comm, cudaStream_t stream, const char* fn, int* channel) {
  FC_CHECK(fc::commCheckAsync(comm));
  int dev = -1;
  FC_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev != comm->cudaDev)
    return fc::setError(fcInvalidUsage, "%s: current device is %d, the communicator's is %d", fn, dev,
                        comm->cudaDev);
  // cudaStreamGetDevice is not allowed on a capturing stream (it would invalidate
  // the capture): check the device of streams that are not capturing; a captured
  // graph is launched on a stream of its own device anyway.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  FC_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture == cudaStreamCaptureStatusNone) {
    int streamDev = -1;
    cudaError_t err = cudaStreamGetDevice(stream, &streamDev);
    if (err != cudaSuccess)
      return fc::setError(fcInvalidArgument, "%s: stream %p is not a valid stream: %s", fn,
                          (void*)stream, cudaGetErrorString(err));
    if (streamDev != comm->cudaDev)
      return fc::setError(fcInvalidUsage,
                          "%s: the stream belongs to device %d, the communicator's is %d", fn,
                          streamDev, comm->cudaDev);
  }
  return fc::commChannel(comm, stream, channel);
}

}  // namespace

FC_API fcResult_t fcAllReduceOneShot(const void* sendbuff, void* recvbuff, size_t count,
                                     fcDataType_t datatype, fcRedOp_t op, fcComm_t comm,
                                     cudaStream_t stream) {
  fc::clearError();
  size_t elem;
  // A symmetric sendbuff (fcMemAlloc), 16-byte aligned and not overwritten by the
  // output, is read by the peers where it is: no copy-in, no workspace limit.
  fc::SymSource src{};
  const bool zeroCopy =
      comm != nullptr && comm->magic == fcComm::kAlive && sendbuff != recvbuff &&
      fc::dataTypeSize(datatype) != 0 && count <= SIZE_MAX / fc::dataTypeSize(datatype) &&
      fc::commSymmetricSource(comm, sendbuff, count * fc::dataTypeSize(datatype), &src) &&
      src.offset % 16 == 0;
  auto need = [zeroCopy](size_t bytes) { return zeroCopy ? 0 : fc::allReduceOneShotWorkspace(bytes); };
  FC_CHECK(checkCollective(comm, sendbuff, recvbuff, count, datatype, op, "fcAllReduceOneShot", need,
                           &elem));
  if (count == 0) return fcSuccess;
  int channel;
  FC_CHECK(checkLaunch(comm, stream, "fcAllReduceOneShot", &channel));
  return fc::launchAllReduceOneShot(comm->dev, channel, sendbuff, recvbuff, count, datatype,
                                    zeroCopy ? &src : nullptr, stream);
}

FC_API fcResult_t fcBarrier(fcComm_t comm, cudaStream_t stream) {
  fc::clearError();
  FC_CHECK(fc::checkComm(comm, "fcBarrier"));
  int channel;
  FC_CHECK(checkLaunch(comm, stream, "fcBarrier", &channel));
  return fc::launchBarrier(comm->dev, channel, stream);
}
