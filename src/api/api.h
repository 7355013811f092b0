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

// The checks every op makes before it enqueues: the communicator is healthy, the
// current device and the stream's device are the communicator's; *channel is the
// stream's channel.
inline fcResult_t checkStream(fcComm* comm, const char* fn, cudaStream_t stream, int* channel) {
  FC_CHECK(commCheckAsync(comm));
  int dev = -1;
  FC_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev != comm->cudaDev)
    return setError(fcInvalidUsage, "%s: current device is %d, the communicator's is %d", fn, dev,
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
      return setError(fcInvalidArgument, "%s: stream %p is not a valid stream: %s", fn, (void*)stream,
                      cudaGetErrorString(err));
    if (streamDev != comm->cudaDev)
      return setError(fcInvalidUsage, "%s: the stream belongs to device %d, the communicator's is %d", fn,
                      streamDev, comm->cudaDev);
  }
  return commChannel(comm, stream, channel);
}

}  // namespace fc
