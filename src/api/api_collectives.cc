// Collective entry points: validate, pick an algorithm, hand over to src/collectives.
#include "api/collective_call.h"
#include "comm/pointers.h"

namespace fc::api {

// A count whose buffer cannot exist (over 2^48 bytes, or wrapping around the address
// space) is refused as too large, before the overlap check: an overflowed count used
// to be reported as overlapping buffers.
fcResult_t checkFits(const Call& c, const char* name, const void* p, size_t elems) {
  if (fc::bufferFits(p, elems, c.elem)) return fcSuccess;
  return fc::setError(fcInvalidArgument,
                      "%s: %s is too large: %s would hold %zu elements of %zu bytes, over 2^48 bytes or past the "
                      "end of the address space",
                      c.fn, c.countName, name, elems, c.elem);
}

// Argument checks shared by every collective (nothing is launched or written on
// failure), sizes before alignment and before checkOverlap. Sets c.elem; *noop when
// count is 0.
fcResult_t checkArgs(Call& c, fcRedOp_t op, bool reduces, bool* noop) {
  FC_CHECK(fc::checkComm(c.comm, c.fn));
  c.elem = fc::dataTypeSize(c.dtype);
  if (c.elem == 0)
    return fc::setError(fcInvalidArgument, "%s: unknown datatype %d (fcFloat16, fcFloat32, fcBfloat16)",
                        c.fn, int(c.dtype));
  if (reduces && op != fcSum)
    return fc::setError(fcInvalidArgument, "%s: unsupported op %d (fcSum)", c.fn, int(op));
  *noop = c.sendElems == 0;
  if (*noop) return fcSuccess;
  if (c.send == nullptr || c.recv == nullptr)
    return fc::setError(fcInvalidArgument, "%s: %s is NULL", c.fn, c.send ? c.recvName : "sendbuff");
  FC_CHECK(checkFits(c, "sendbuff", c.send, c.sendElems));
  FC_CHECK(checkFits(c, c.recvName, c.recv, c.recvElems));
  const uintptr_t s = reinterpret_cast<uintptr_t>(c.send), r = reinterpret_cast<uintptr_t>(c.recv);
  if ((s | r) % c.elem)
    return fc::setError(fcInvalidArgument, "%s: buffers must be aligned to the element size (%zu)", c.fn,
                        c.elem);
  return fcSuccess;
}

// A symmetric sendbuff (fcMemAlloc) at a 16-byte aligned offset, not overwritten by
// the op's own output, is read by the peers where it is.
void detectZeroCopy(Call& c, bool extraAlignment) {
  const size_t bytes = (c.sendElems * c.elem + 15) / 16 * 16;
  c.zeroCopy = c.send != c.inPlaceSend && extraAlignment &&
               fc::commSymmetricSource(c.comm, c.send, bytes, &c.src) && c.src.offset % 16 == 0;
}

// Helpers of this file only.
namespace {

// Buffers may overlap only in the op's in-place form (checked after the size limits,
// whose message is the more useful one when a count is simply too large; they also
// keep this arithmetic from wrapping).
fcResult_t checkOverlap(const Call& c) {
  const uintptr_t s = reinterpret_cast<uintptr_t>(c.send), r = reinterpret_cast<uintptr_t>(c.recv);
  const size_t sb = c.sendElems * c.elem, rb = c.recvElems * c.elem;
  if (c.send != c.inPlaceSend && s < r + rb && r < s + sb)
    return fc::setError(fcInvalidArgument, "%s: sendbuff and recvbuff overlap, and not in the op's "
                        "in-place form", c.fn);
  return fcSuccess;
}

// The last check before anything is enqueued: both buffers are memory of the comm's
// GPU (comm/pointers.h). Then the op's place in its sequence.
fcResult_t beginOp(Call& c, cudaStream_t stream) {
  FC_CHECK(fc::checkBuffers(c.comm, c.fn, {{"sendbuff", c.send}, {"recvbuff", c.recv}}));
  return fc::commOpBegin(c.comm, c.fn, stream, &c.lane);
}

// The staged one-shot needs the whole (16-byte padded) input in the workspace.
fcResult_t checkOneShotFits(const Call& c) {
  if (c.zeroCopy || fc::allReduceOneShotWorkspace(c.sendElems * c.elem) <= c.comm->params.workspaceBytes)
    return fcSuccess;
  return fc::setError(fcInvalidArgument,
                      "%s: %zu elements (%zu bytes) exceed the workspace of %llu bytes; the limit is "
                      "%llu elements of this type (raise FC_WORKSPACE_BYTES, use fcAllReduce, or a "
                      "sendbuff from fcMemAlloc)",
                      c.fn, c.sendElems, c.sendElems * c.elem,
                      (unsigned long long)c.comm->params.workspaceBytes,
                      (unsigned long long)(c.comm->params.workspaceBytes / c.elem));
}

// recvbuff +/- offset, the in-place sendbuff of reduce-scatter and all-gather. In
// integers: the count is not checked yet, and pointer arithmetic out of any buffer
// (a count too large, refused next) would be undefined behaviour.
const void* inPlaceAddress(const void* recvbuff, int sign, size_t offset) {
  const uintptr_t r = reinterpret_cast<uintptr_t>(recvbuff);
  return reinterpret_cast<const void*>(sign < 0 ? r - offset : r + offset);
}

const fc::SymSource* zeroCopySource(const Call& c) { return c.zeroCopy ? &c.src : nullptr; }

// The one-shot: Lamport (push + poll, no barriers) when the input fits a push slot,
// unless FC_ALLREDUCE_ALGO=oneshot forces the barrier variant; otherwise the barrier
// one-shot (staged or zero-copy).
fcResult_t launchOneShot(const Call& c, cudaStream_t stream) {
  if (fc::tuning::oneShotIsLamport(c.comm->nranks, c.sendElems * c.elem, c.comm->params.lamportMaxBytes,
                                   c.comm->params.allReduceAlgo))
    return fc::launchAllReduceLamport(c.comm->dev, c.lane.channel, c.send, c.recv, c.sendElems, c.dtype,
                                      c.comm->params.pdl, stream, c.comm->params.lamportStages, c.sig);
  return fc::launchAllReduceOneShot(c.comm->dev, c.lane.channel, c.send, c.recv, c.sendElems, c.dtype,
                                    zeroCopySource(c), stream, c.sig);
}

}  // namespace
}  // namespace fc::api

using namespace fc::api;

FC_API fcResult_t fcAllReduceOneShot(const void* sendbuff, void* recvbuff, size_t count,
                                     fcDataType_t datatype, fcRedOp_t op, fcComm_t comm,
                                     cudaStream_t stream) {
  fc::clearError();
  Call c{"fcAllReduceOneShot", comm, sendbuff, count, recvbuff, count, recvbuff, datatype};
  bool noop;
  FC_CHECK(checkArgs(c, op, true, &noop));
  if (noop) return fcSuccess;
  detectZeroCopy(c, true);
  FC_CHECK(checkOneShotFits(c));
  FC_CHECK(checkOverlap(c));
  FC_CHECK(beginOp(c, stream));
  return fc::commOpEnd(comm, c.lane, stream, launchOneShot(c, stream));
}

namespace fc::api {

// fcAllReduce's algorithm for c (checks that come before beginOp included).
fcResult_t chooseAllReduce(const Call& c, fc::AllReduceAlgo* algo) {
  const fcComm* comm = c.comm;
  const size_t bytes = c.sendElems * c.elem;
  fc::tuning::AllReduceQuery q;
  q.forced = comm->params.allReduceAlgo;
  q.nranks = comm->nranks;
  q.count = c.sendElems;
  q.bytes = bytes;
  q.oneShotFits = c.zeroCopy || fc::allReduceOneShotWorkspace(bytes) <= comm->params.workspaceBytes;
  *algo = fc::tuning::chooseAllReduce(q);
  return q.forced == fc::AllReduceAlgo::OneShot ? checkOneShotFits(c) : fcSuccess;
}

fcResult_t launchAllReduce(const Call& call, fc::AllReduceAlgo algo, cudaStream_t stream) {
  fcComm* comm = call.comm;
  // An op's own signature also names the algorithm: ranks whose choices differ (a
  // zero-copy input on some ranks only, a per-rank FC_ALLREDUCE_ALGO) meet a mismatch
  // instead of passing each other's barriers in another protocol.
  Call c = call;
  if (c.sig != 0) c.sig ^= (uint32_t(algo) + 1u) << 20;
  FC_TRACE("%s: all-reduce of %zu bytes, %s%s", c.fn, c.sendElems * c.elem,
           algo == fc::AllReduceAlgo::OneShot          ? "one-shot"
           : algo == fc::AllReduceAlgo::TwoShot        ? "two-shot"
           : algo == fc::AllReduceAlgo::LamportTwoShot ? "Lamport two-shot"
                                            : "copy engine",
           c.zeroCopy ? ", zero-copy" : "");
  switch (algo) {
    case fc::AllReduceAlgo::OneShot: return launchOneShot(c, stream);
    case fc::AllReduceAlgo::LamportTwoShot:
      return fc::launchAllReduceLamportTwoShot(comm->dev, c.lane.channel, c.send, c.recv, c.sendElems, c.dtype,
                                               comm->params.pdl, stream, c.sig);
    case fc::AllReduceAlgo::CopyEngine:
      // The copy-engine passes' barriers carry the all-reduce's own signature: an op
      // built on it meets the peers with its own first.
      if (c.sig != 0) FC_CHECK(fc::launchOpBarrier(comm->dev, c.lane.channel, fc::Op(c.sig >> 28), c.sig, stream));
      return fc::launchAllReduceCe(comm->dev, c.lane.channel, *comm->copies[size_t(c.lane.channel)], c.send,
                                   c.recv, c.sendElems, c.dtype, stream);
    default:
      return fc::launchAllReduceTwoShot(comm->dev, c.lane.channel, c.send, c.recv, c.sendElems, c.dtype,
                                        zeroCopySource(c), stream, c.sig);
  }
}

fcResult_t launchAllGather(const Call& c, cudaStream_t stream) {
  const fcComm* comm = c.comm;
  const size_t bytes = c.recvElems * c.elem;
  if (fc::tuning::chooseAllGather(comm->nranks, comm->params.allGatherAlgo, bytes) == fc::MoveAlgo::CopyEngine) {
    FC_TRACE("%s: all-gather of %zu bytes out, copy engine%s", c.fn, bytes, c.zeroCopy ? ", zero-copy" : "");
    return fc::launchAllGatherCe(comm->dev, c.lane.channel, *comm->copies[size_t(c.lane.channel)], c.send, c.recv,
                                 c.sendElems, c.dtype, zeroCopySource(c), stream);
  }
  return fc::launchAllGather(comm->dev, c.lane.channel, c.send, c.recv, c.sendElems, c.dtype, zeroCopySource(c),
                             stream);
}

}  // namespace fc::api

FC_API fcResult_t fcAllReduce(const void* sendbuff, void* recvbuff, size_t count, fcDataType_t datatype,
                              fcRedOp_t op, fcComm_t comm, cudaStream_t stream) {
  fc::clearError();
  Call c{"fcAllReduce", comm, sendbuff, count, recvbuff, count, recvbuff, datatype};
  bool noop;
  FC_CHECK(checkArgs(c, op, true, &noop));
  if (noop) return fcSuccess;
  detectZeroCopy(c, true);
  fc::AllReduceAlgo algo;
  FC_CHECK(chooseAllReduce(c, &algo));
  FC_CHECK(checkOverlap(c));
  FC_CHECK(beginOp(c, stream));
  return fc::commOpEnd(comm, c.lane, stream, launchAllReduce(c, algo, stream));
}

FC_API fcResult_t fcReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                  fcDataType_t datatype, fcRedOp_t op, fcComm_t comm,
                                  cudaStream_t stream) {
  fc::clearError();
  FC_CHECK(fc::checkComm(comm, "fcReduceScatter"));
  const size_t W = size_t(comm->nranks);
  if (recvcount > SIZE_MAX / W)
    return fc::setError(fcInvalidArgument, "fcReduceScatter: recvcount %zu is too large (times nranks it overflows)",
                        recvcount);
  // In place (NCCL's convention): recvbuff == sendbuff + rank * recvcount.
  const size_t es = fc::dataTypeSize(datatype);
  const void* inPlaceSend = inPlaceAddress(recvbuff, -1, size_t(comm->rank) * recvcount * es);
  Call c{"fcReduceScatter", comm, sendbuff, W * recvcount, recvbuff, recvcount, inPlaceSend, datatype, "recvcount"};
  bool noop;
  FC_CHECK(checkArgs(c, op, true, &noop));
  if (noop) return fcSuccess;
  FC_CHECK(checkOverlap(c));
  detectZeroCopy(c, recvcount * c.elem % 16 == 0);  // every block's start must be 16-byte aligned
  FC_CHECK(beginOp(c, stream));
  fcResult_t res;
  switch (fc::tuning::chooseReduceScatter(comm->nranks, comm->params.reduceScatterAlgo, recvcount * c.elem,
                                  W * recvcount * c.elem)) {
    case fc::MoveAlgo::Lamport:
      FC_TRACE("fcReduceScatter: %zu bytes in, Lamport", W * recvcount * c.elem);
      res = fc::launchReduceScatterLamport(comm->dev, c.lane.channel, sendbuff, recvbuff, recvcount, datatype,
                                           comm->params.pdl, stream);
      break;
    case fc::MoveAlgo::CopyEngine:
      FC_TRACE("fcReduceScatter: %zu bytes in, copy engine", W * recvcount * c.elem);
      res = fc::launchReduceScatterCe(comm->dev, c.lane.channel, *comm->copies[size_t(c.lane.channel)], sendbuff,
                                      recvbuff, recvcount, datatype, stream);
      break;
    default:
      res = fc::launchReduceScatter(comm->dev, c.lane.channel, sendbuff, recvbuff, recvcount, datatype,
                                    zeroCopySource(c), stream);
  }
  return fc::commOpEnd(comm, c.lane, stream, res);
}

FC_API fcResult_t fcAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                              fcDataType_t datatype, fcComm_t comm, cudaStream_t stream) {
  fc::clearError();
  FC_CHECK(fc::checkComm(comm, "fcAllGather"));
  const size_t W = size_t(comm->nranks);
  if (sendcount > SIZE_MAX / W)
    return fc::setError(fcInvalidArgument, "fcAllGather: sendcount %zu is too large (times nranks it overflows)",
                        sendcount);
  // In place (NCCL's convention): sendbuff == recvbuff + rank * sendcount.
  const size_t es = fc::dataTypeSize(datatype);
  const void* inPlaceSend = inPlaceAddress(recvbuff, +1, size_t(comm->rank) * sendcount * es);
  Call c{"fcAllGather", comm, sendbuff, sendcount, recvbuff, W * sendcount, inPlaceSend, datatype, "sendcount"};
  bool noop;
  FC_CHECK(checkArgs(c, fcSum, false, &noop));
  if (noop) return fcSuccess;
  FC_CHECK(checkOverlap(c));
  detectZeroCopy(c, true);
  FC_CHECK(beginOp(c, stream));
  return fc::commOpEnd(comm, c.lane, stream, fc::api::launchAllGather(c, stream));
}

FC_API fcResult_t fcBarrier(fcComm_t comm, cudaStream_t stream) {
  fc::clearError();
  FC_CHECK(fc::checkComm(comm, "fcBarrier"));
  Call c{"fcBarrier", comm, nullptr, 0, nullptr, 0, nullptr, fcFloat32};
  FC_CHECK(beginOp(c, stream));
  return fc::commOpEnd(comm, c.lane, stream, fc::launchBarrier(comm->dev, c.lane.channel, stream));
}
