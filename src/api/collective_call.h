// What the collective entry points share: a call as the argument checks see it, the
// checks, and fcAllReduce's algorithm choice and launch (api_collectives.cc defines
// them; api_norm.cc's all-reduce + RMSNorm uses them for its all-reduce half).
#pragma once

#include "api/api.h"
#include "collectives/collectives.h"
#include "tuning/tuning.h"

namespace fc::api {

// One collective call as the checks see it.
struct Call {
  const char* fn;
  fcComm_t comm;
  const void* send;
  size_t sendElems;
  void* recv;
  size_t recvElems;
  const void* inPlaceSend;  // sendbuff == this is the op's in-place form
  fcDataType_t dtype;
  const char* countName = "count";  // the count argument's name, for messages
  const char* recvName = "recvbuff";  // the output's
  size_t elem = 0;           // sizeof(dtype)
  bool zeroCopy = false;     // sendbuff is symmetric: peers read it where it is
  fc::SymSource src{};
  fc::OpLane lane{};
  // The signature the Lamport kernels' call headers compare (0: the collective's own);
  // an op built on the collective (fcMatmulAllReduce) sets its own, of its whole shape.
  uint32_t sig = 0;
};

// checkArgs' size check of one buffer: `elems` elements of c.elem bytes at p must fit
// the address space (else fcInvalidArgument naming `name` and c.countName).
fcResult_t checkFits(const Call& c, const char* name, const void* p, size_t elems);

// The checks every collective shares (comm, datatype, op, NULL buffers, sizes,
// element alignment); sets c.elem, and *noop when the count is 0.
fcResult_t checkArgs(Call& c, fcRedOp_t op, bool reduces, bool* noop);

// Sets c.zeroCopy (and c.src) when sendbuff is fcMemAlloc memory the peers can read
// where it is.
void detectZeroCopy(Call& c, bool extraAlignment);

// fcAllReduce's algorithm for c (tuning::chooseAllReduce; the checks that come before
// the op is begun included).
fcResult_t chooseAllReduce(const Call& c, fc::AllReduceAlgo* algo);

// Enqueue the all-reduce of c (begun: c.lane set) with `algo`. A non-zero c.sig (an op
// built on it) is what its Lamport call headers or barriers compare, with the algorithm
// folded in.
fcResult_t launchAllReduce(const Call& c, fc::AllReduceAlgo algo, cudaStream_t stream);

// Enqueue fcAllGather's algorithm for c (begun: c.lane set; c.send and c.recv as
// fcAllGather's sendbuff and recvbuff, the in-place form included).
fcResult_t launchAllGather(const Call& c, cudaStream_t stream);

// fcAllReduceResidualRMSNorm's argument checks beyond checkArgs' (which saw sendbuff
// and the output): shape, alignment, eps, the other buffers' sizes and overlaps. n.in
// may be NULL (fcMatmulAllReduce's forms: the product's buffer is theirs to choose).
fcResult_t checkNormArgs(const Call& c, const NormCall& n);

// fcAllReduceResidualRMSNorm's path (tuning::chooseAllReduceNorm: one Lamport kernel,
// one two-shot kernel, or the all-reduce (algo) and then the local residual + RMSNorm
// kernel).
struct NormPlan {
  fc::NormPath path;
  fc::AllReduceAlgo algo;  // Unfused: the all-reduce's
};

// The path for the checked call (c: the all-reduce half, c.send = n.in; the checks
// that come before the op is begun included).
fcResult_t chooseNorm(Call& c, const NormCall& n, NormPlan* plan);

// Enqueue the begun call on `plan`'s path. sum: the unfused path's all-reduce output
// (n.out, or a buffer of tokens x hidden elements for the fp8 variant; c.send == sum
// runs it in place); unused by the others.
fcResult_t launchNorm(Call& c, const NormCall& n, const NormPlan& plan, void* sum, cudaStream_t stream);

}  // namespace fc::api
