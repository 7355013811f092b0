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

// Enqueue the all-reduce of c (begun: c.lane set) with `algo`.
fcResult_t launchAllReduce(const Call& c, fc::AllReduceAlgo algo, cudaStream_t stream);

}  // namespace fc::api
