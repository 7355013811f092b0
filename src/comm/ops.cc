// How an operation's work is placed: which channel it uses, what it waits for,
// and its scratch.
//
// Ordering contract (include/fusedcomm.h, "Streams"): a communicator's operations run
// in the order they were issued, whatever streams they were issued on, as NCCL's
// implicit launch order does. Operations issued eagerly form one sequence on channel
// 0; operations captured into CUDA graphs form another on channel 1 (channel 0 too
// when the communicator has one channel), ordered within each capture in capture
// order. An op whose stream differs from the previous op's of its sequence first
// waits for an event recorded after that op. Every op of a sequence therefore sees
// its channel's signal slots, Lamport buffers, workspace, copy queue, cuBLASLt
// workspace and scratch to itself, which is what the kernels' protocols assume, and
// any number of streams can carry them: nothing is kept per stream.
//
// Events recorded during a capture may only be waited on by streams of the same
// capture (a cross-capture or eager wait would invalidate it), so the captured
// sequence restarts with every capture (told apart by the capture id), and eager
// ops never wait for captured ones: a graph's replays run when its launch is
// ordered, which only the caller can see (as with NCCL).
#include "comm/comm.h"
#include "core/log.h"
#include "core/result.h"

namespace fc {

fcResult_t commOpBegin(fcComm* comm, const char* fn, cudaStream_t stream, OpLane* lane) {
  FC_CHECK(commCheckAsync(comm));
  int dev = -1;
  FC_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev != comm->cudaDev)
    return setError(fcInvalidUsage, "%s: current device is %d, the communicator's is %d", fn, dev,
                    comm->cudaDev);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  unsigned long long captureId = 0;
  cudaError_t err = cudaStreamGetCaptureInfo(stream, &capture, &captureId);
  if (err != cudaSuccess)
    return setError(fcInvalidArgument, "%s: stream %p is not a valid stream: %s", fn, (void*)stream,
                    cudaGetErrorString(err));
  lane->capturing = capture != cudaStreamCaptureStatusNone;
  lane->channel = lane->capturing && comm->params.channels > 1 ? 1 : 0;
  fcComm::LastOp& last = lane->capturing ? comm->lastCaptured : comm->lastEager;
  bool sameStream = false;
  if (lane->capturing) {
    // cudaStreamGetId and cudaStreamGetDevice would invalidate the capture. A graph
    // is launched on a stream of its own device anyway; and a captured op always
    // waits for the previous one of its capture (a no-op edge on the same stream).
    lane->streamId = 0;
  } else {
    // Streams are told apart by their id, unique over the context's life: a handle
    // may be reused by a stream created after another one was destroyed, and that
    // new stream is not ordered after the old one's work.
    err = cudaStreamGetId(stream, &lane->streamId);
    if (err != cudaSuccess)
      return setError(fcInvalidArgument, "%s: stream %p is not a valid stream: %s", fn, (void*)stream,
                      cudaGetErrorString(err));
    sameStream = last.issued && last.streamId == lane->streamId;
  }
  if (!lane->capturing && !sameStream) {
    // The stream of the previous op was checked then.
    int streamDev = -1;
    err = cudaStreamGetDevice(stream, &streamDev);
    if (err != cudaSuccess)
      return setError(fcInvalidArgument, "%s: stream %p is not a valid stream: %s", fn, (void*)stream,
                      cudaGetErrorString(err));
    if (streamDev != comm->cudaDev)
      return setError(fcInvalidUsage, "%s: the stream belongs to device %d, the communicator's is %d", fn,
                      streamDev, comm->cudaDev);
  }
  const bool sameSequence = last.issued && (!lane->capturing || last.captureId == captureId);
  if (sameSequence && !sameStream) {
    FC_TRACE("%s: after the previous op of channel %d, which ran on another stream", fn, lane->channel);
    FC_CUDA_CHECK(cudaStreamWaitEvent(stream, last.done, 0));
  }
  lane->captureId = captureId;
  return fcSuccess;
}

fcResult_t commOpEnd(fcComm* comm, const OpLane& lane, cudaStream_t stream, fcResult_t res) {
  // Also after a failed launch: whatever part of the op was enqueued stays ordered.
  fcComm::LastOp& last = lane.capturing ? comm->lastCaptured : comm->lastEager;
  const cudaError_t err = cudaEventRecord(last.done, stream);
  last.streamId = lane.streamId;
  last.captureId = lane.captureId;
  last.issued = err == cudaSuccess;
  if (res != fcSuccess) return res;
  if (err != cudaSuccess)
    return setError(fcUnhandledCudaError, "cudaEventRecord after the op: %s", cudaGetErrorString(err));
  return fcSuccess;
}

// Why a captured op's PDL kernel behind its own cuBLASLt GEMM also depends on the op's
// start. Captured, a kernel launched with PDL gets a programmatic edge from each kernel
// node it depends on (cudaGraphGetEdges). Behind the op's GEMM alone it has one, and
// measured on 2 H200s (CUDA 13.0, cuBLASLt's nvjet kernels; perf-log.md, thirty-sixth
// session) it then started no sooner than launched without PDL; the same kernels issued as
// two calls (the GEMM, then fcAllReduce, whose commOpBegin adds an edge from the previous
// op) ran 0.2-0.45 us sooner. With the same second edge, from what preceded the op
// (complete before the GEMM starts: the GEMM depends on it too, so no order changes), the
// op ran as fast as the two calls at every cell of 12-512 rows. Why one programmatic edge
// behaves so and two do not is not documented; the measurement is the reason. The event is
// recorded during capture only, where it costs no graph node; eager calls are unchanged.
static bool startEdge(const fcComm* comm, const OpLane& lane) {
  return lane.capturing && comm->params.pdl && comm->params.pdlStartEdge;
}

fcResult_t commMarkStart(fcComm* comm, const OpLane& lane, cudaStream_t stream) {
  if (startEdge(comm, lane)) FC_CUDA_CHECK(cudaEventRecord(comm->captureStart, stream));
  return fcSuccess;
}

fcResult_t commDependOnStart(fcComm* comm, const OpLane& lane, cudaStream_t stream) {
  if (startEdge(comm, lane)) FC_CUDA_CHECK(cudaStreamWaitEvent(stream, comm->captureStart, 0));
  return fcSuccess;
}

fcResult_t commScratch(fcComm* comm, const char* fn, const OpLane& lane, size_t bytes, void** p) {
  Scratch& mine = *comm->scratch[size_t(lane.channel)];
  if (bytes > mine.bytes()) {
    if (lane.capturing)
      return setError(fcInvalidUsage,
                      "%s needs %zu bytes of scratch, and the communicator has %zu: scratch cannot grow "
                      "during CUDA graph capture. Call the op once outside capture first (scratch keeps "
                      "its largest size), or set config.scratchBytes / FC_SCRATCH_BYTES to at least %zu",
                      fn, bytes, mine.bytes(), bytes);
    // Every channel grows, so that a capture after an eager warm-up finds its size.
    for (auto& s : comm->scratch) FC_CHECK(s->grow(bytes));
  }
  *p = mine.ptr();
  return fcSuccess;
}

}  // namespace fc
