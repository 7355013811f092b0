// fcAllReduceResidualRMSNorm and its fp8 variant: validate, pick the path (one Lamport
// kernel, or the all-reduce then the local residual + RMSNorm kernel), launch.
#include "api/collective_call.h"
#include "comm/pointers.h"

namespace fc::api {
namespace {

// [a, a + an) and [b, b + bn) share a byte (in integers: sizes were checked to fit); a
// NULL buffer (fcMatmulAllReduce's sendbuff, not chosen yet) overlaps nothing.
bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  const uintptr_t x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x != 0 && y != 0 && x < y + bn && y < x + an;
}

}  // namespace

fcResult_t checkNormArgs(const Call& c, const NormCall& n) {
  const char* fn = c.fn;
  if (n.residual == nullptr || n.weight == nullptr || n.residualOut == nullptr)
    return setError(fcInvalidArgument, "%s: %s is NULL", fn,
                    !n.residual ? "residual" : !n.weight ? "weight" : "residualOut");
  if (n.hidden * c.elem % 16 != 0)
    return setError(fcInvalidArgument,
                    "%s: hidden = %zu: a row must be a multiple of 16 bytes (hidden a multiple of %zu for this "
                    "datatype)",
                    fn, n.hidden, 16 / c.elem);
  if (!(n.eps >= 0.f && n.eps <= 3.4e38f))
    return setError(fcInvalidArgument, "%s: eps = %g: must be finite and >= 0", fn, double(n.eps));
  const size_t count = n.tokens * n.hidden;
  FC_CHECK(checkFits(c, "residual", n.residual, count));
  FC_CHECK(checkFits(c, "residualOut", n.residualOut, count));
  FC_CHECK(checkFits(c, "weight", n.weight, n.hidden));
  const bool fp8 = n.outFp8 != nullptr;
  const void* out = fp8 ? n.outFp8 : n.out;
  const struct {
    const char* name;
    const void* p;
  } bufs[] = {{"sendbuff", n.in}, {"residual", n.residual}, {"weight", n.weight},
              {"residualOut", n.residualOut}, {"normOut", out}};
  for (const auto& b : bufs)
    if (reinterpret_cast<uintptr_t>(b.p) % 16 != 0)
      return setError(fcInvalidArgument, "%s: %s must be 16-byte aligned", fn, b.name);
  if (fp8 && reinterpret_cast<uintptr_t>(n.scale) % sizeof(float) != 0)
    return setError(fcInvalidArgument, "%s: scale must be 4-byte aligned", fn);
  const size_t bytes = count * c.elem, wbytes = n.hidden * c.elem;
  const size_t outBytes = fp8 ? count : bytes;
  // Outputs overlap nothing, except residualOut == residual (in place).
  if (overlaps(out, outBytes, n.in, bytes) || overlaps(out, outBytes, n.residual, bytes) ||
      overlaps(out, outBytes, n.weight, wbytes) || overlaps(out, outBytes, n.residualOut, bytes) ||
      (fp8 && overlaps(out, outBytes, n.scale, sizeof(float))))
    return setError(fcInvalidArgument, "%s: normOut overlaps another buffer", fn);
  if (overlaps(n.residualOut, bytes, n.in, bytes) || overlaps(n.residualOut, bytes, n.weight, wbytes) ||
      (fp8 && overlaps(n.residualOut, bytes, n.scale, sizeof(float))) ||
      (n.residualOut != n.residual && overlaps(n.residualOut, bytes, n.residual, bytes)))
    return setError(fcInvalidArgument,
                    "%s: residualOut overlaps sendbuff, weight or residual (only residualOut == residual, "
                    "in place, is allowed)",
                    fn);
  return fcSuccess;
}

namespace {

// Both entry points: c.send / c.recv are sendbuff and the output (normOut, or the
// fp8 one, for the NULL and size checks), n the whole call.
fcResult_t allReduceNorm(Call& c, NormCall& n, cudaStream_t stream) {
  fcComm* comm = c.comm;
  const char* fn = c.fn;
  FC_CHECK(checkComm(comm, fn));
  if (n.tokens > 0 && n.hidden == 0) return setError(fcInvalidArgument, "%s: hidden is 0", fn);
  if (n.hidden > 0 && n.tokens > SIZE_MAX / n.hidden)
    return setError(fcInvalidArgument, "%s: tokens * hidden (%zu * %zu) overflows", fn, n.tokens, n.hidden);
  c.sendElems = c.recvElems = n.tokens * n.hidden;
  bool noop;
  FC_CHECK(checkArgs(c, fcSum, true, &noop));
  if (noop) return fcSuccess;
  if (n.outFp8 != nullptr && n.scale == nullptr) return setError(fcInvalidArgument, "%s: scale is NULL", fn);
  FC_CHECK(checkNormArgs(c, n));
  NormPlan plan;
  FC_CHECK(chooseNorm(c, n, &plan));
  FC_CHECK(checkBuffers(comm, fn,
                        {{"sendbuff", n.in}, {"residual", n.residual}, {"weight", n.weight},
                         {"residualOut", n.residualOut}, {c.recvName, c.recv}, {"scale", n.scale}}));
  FC_CHECK(commOpBegin(comm, fn, stream, &c.lane));
  // The unfused path's all-reduce goes into normOut (the fp8 variant: into the
  // channel's scratch).
  void* sum = n.out;
  fcResult_t res = fcSuccess;
  if (plan.path == NormPath::Unfused && n.outFp8 != nullptr)
    res = commScratch(comm, fn, c.lane, c.sendElems * c.elem, &sum);
  if (res == fcSuccess) res = launchNorm(c, n, plan, sum, stream);
  return commOpEnd(comm, c.lane, stream, res);
}

}  // namespace

fcResult_t chooseNorm(Call& c, const NormCall& n, NormPlan* plan) {
  const fcComm* comm = c.comm;
  // One kernel, the two-shot kernel, or the all-reduce then the local norm
  // (tuning::chooseAllReduceNorm).
  tuning::NormQuery q;
  q.forced = comm->params.allReduceNormAlgo;
  q.nranks = comm->nranks;
  q.bytes = c.sendElems * c.elem;
  q.rows = n.tokens;
  q.maxOverride = comm->params.lamportMaxBytes;
  q.twoShotFits = allReduceNormTwoShotRows(comm->nranks, n.hidden, c.dtype) > 0;
  plan->path = tuning::chooseAllReduceNorm(q);
  plan->algo = AllReduceAlgo::OneShot;
  if (plan->path == NormPath::Unfused) {
    detectZeroCopy(c, true);
    FC_CHECK(chooseAllReduce(c, &plan->algo));
  }
  return fcSuccess;
}

fcResult_t launchNorm(Call& c, const NormCall& n, const NormPlan& plan, void* sum, cudaStream_t stream) {
  const fcComm* comm = c.comm;
  const bool pdl = comm->params.pdl;
  switch (plan.path) {
    case NormPath::OneKernel:
      FC_TRACE("%s: %zu x %zu, one Lamport kernel%s", c.fn, n.tokens, n.hidden, pdl ? " (PDL)" : "");
      return launchAllReduceNormLamport(comm->dev, c.lane.channel, n, pdl, comm->params.normClusterPacks,
                                        comm->params.normWideCtas, comm->params.normRowCtas, comm->params.normStages,
                                        stream, c.sig);
    case NormPath::TwoShot:
      FC_TRACE("%s: %zu x %zu, one two-shot kernel%s", c.fn, n.tokens, n.hidden, pdl ? " (PDL)" : "");
      return launchAllReduceNormTwoShot(comm->dev, c.lane.channel, n, pdl, comm->params.normPassAlign, stream, c.sig);
    default:
      c.recv = sum;
      // The all-reduce compares the norm's shape, not only its count: ranks whose rows
      // differ in length (the same tokens x hidden) are caught as a mismatch (fault
      // scenario mismatch-norm) instead of normalising different rows. An op built on
      // this path (fcMatmulAllReduce) has set its own.
      if (c.sig == 0)
        c.sig = opSignature(Op::AllReduceNorm, uint32_t(n.datatype), shapeKey(n.tokens, n.hidden, 1, 0));
      FC_CHECK(launchAllReduce(c, plan.algo, stream));
      return launchResidualNorm(n, sum, pdl, stream, false, comm->params.normLocalRows);
  }
}

}  // namespace fc::api

FC_API fcResult_t fcAllReduceResidualRMSNorm(const void* sendbuff, const void* residual, const void* weight,
                                             void* residualOut, void* normOut, size_t tokens, size_t hidden,
                                             float eps, fcDataType_t datatype, fcComm_t comm,
                                             cudaStream_t stream) {
  fc::clearError();
  fc::api::Call c{"fcAllReduceResidualRMSNorm", comm, sendbuff, 0, normOut, 0, nullptr, datatype,
                  "tokens * hidden", "normOut"};
  fc::NormCall n{sendbuff, residual, weight, residualOut, normOut, tokens, hidden, eps, datatype};
  return fc::api::allReduceNorm(c, n, stream);
}

FC_API fcResult_t fcAllReduceResidualRMSNormFp8(const void* sendbuff, const void* residual, const void* weight,
                                                void* residualOut, void* normOutFp8, const float* scale,
                                                size_t tokens, size_t hidden, float eps, fcDataType_t datatype,
                                                fcComm_t comm, cudaStream_t stream) {
  fc::clearError();
  fc::api::Call c{"fcAllReduceResidualRMSNormFp8", comm, sendbuff, 0, normOutFp8, 0, nullptr, datatype,
                  "tokens * hidden", "normOutFp8"};
  fc::NormCall n{sendbuff, residual, weight, residualOut, nullptr, tokens, hidden, eps, datatype, normOutFp8, scale};
  return fc::api::allReduceNorm(c, n, stream);
}
