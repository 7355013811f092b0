// Host launchers of the collective kernels. Arguments are validated by src/api;
// these only pick a launch shape and enqueue on the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/copy_queue.h"
#include "device/device_comm.h"
#include "device/norm_stages.h"
#include "fusedcomm.h"

namespace fc {

// One-shot all-reduce of `count` elements. symmetricIn: where every rank's sendbuff
// lies in symmetric memory (16-byte aligned offset, not recvbuff), or NULL to stage
// through the workspace (then count*size <= workspace, checked by the caller). sig: the
// op signature its barriers compare (0: the collective's own, of its count and dtype;
// an op built on it, such as fcAllReduceResidualRMSNorm, passes its own).
fcResult_t launchAllReduceOneShot(const DeviceComm& dc, int channel, const void* sendbuff,
                                  void* recvbuff, size_t count, fcDataType_t datatype,
                                  const SymSource* symmetricIn, cudaStream_t stream, uint32_t sig = 0);

// Lamport one-shot all-reduce (push, poll the data; no flags): count*size must not
// exceed lamportSlotBytes(nranks). pdl: launch with programmatic dependent launch. stages:
// kLamportFull, but for measurements of the stages (device_comm.h, LamportStage).
// sig, here and in the Lamport launchers below: the op signature the ranks' call
// headers compare (0: the collective's own, of its count and dtype; an op built on it,
// such as fcMatmulAllReduce, passes its own, of its whole shape).
fcResult_t launchAllReduceLamport(const DeviceComm& dc, int channel, const void* sendbuff,
                                  void* recvbuff, size_t count, fcDataType_t datatype, bool pdl,
                                  cudaStream_t stream, uint32_t stages = kLamportFull, uint32_t sig = 0);
// With the communicator, once its DeviceComm is filled in: lets the one-shot's
// production kernels (every datatype, dc's world size) take dc.soloSmemBytes of dynamic
// shared memory, so that a call places its CTAs one to an SM without a host call of its own.
fcResult_t prepareAllReduceLamport(const DeviceComm& dc);

// Lamport all-gather / reduce-scatter (lamport_move.cu: the one-shot's protocol and
// buffers): sendcount / recvcount * size must not exceed lamportSlotBytes(nranks).
// Who takes them: tuning::chooseReduceScatter (fcReduceScatter) and
// tuning::allGatherMatmulGather (fcAllGatherMatmul's unfused path).
fcResult_t launchAllGatherLamport(const DeviceComm& dc, int channel, const void* sendbuff, void* recvbuff,
                                  size_t sendcount, fcDataType_t datatype, bool pdl, cudaStream_t stream);
// sig: the op signature the ranks' call headers compare (0: the reduce-scatter's own,
// of its count and dtype; fcMatmulReduceScatter passes its own, of its whole shape).
fcResult_t launchReduceScatterLamport(const DeviceComm& dc, int channel, const void* sendbuff, void* recvbuff,
                                      size_t recvcount, fcDataType_t datatype, bool pdl, cudaStream_t stream,
                                      uint32_t sig = 0);

// Lamport two-shot all-reduce (push the slices, poll the data; no flags); any count
// (passes of nranks slices of kLamportTwoShotSliceBytes). pdl as above.
fcResult_t launchAllReduceLamportTwoShot(const DeviceComm& dc, int channel, const void* sendbuff,
                                         void* recvbuff, size_t count, fcDataType_t datatype, bool pdl,
                                         cudaStream_t stream, uint32_t sig = 0);

// fcAllReduceResidualRMSNorm's arguments (validated by src/api): tokens rows of
// hidden elements (hidden * size a multiple of 16 bytes, buffers 16-byte aligned).
struct NormCall {
  const void* in;
  const void* residual;
  const void* weight;
  void* residualOut;
  void* out;  // the normed rows in datatype, or NULL when outFp8 takes them
  size_t tokens, hidden;
  float eps;
  fcDataType_t datatype;
  void* outFp8 = nullptr;        // the normed rows as fp8 e4m3 (tokens x hidden bytes), or NULL
  const float* scale = nullptr;  // outFp8 = normed / *scale, saturated (device memory)
};

// All-reduce + residual + RMSNorm in one Lamport kernel (allreduce_norm.cu):
// tokens * hidden * size must not exceed lamportSlotBytes(nranks). pdl: launch with
// programmatic dependent launch. clusterPacks: a row's packs per CTA of a thread block
// cluster (0: one CTA per row). wideCtas: a CTA whose share of a row is over kThreads
// packs gets up to 992 data threads where each then has one pack (FC_ARNORM_WIDE_CTAS,
// tuning::normWideCtas). rowCtas: where a row is one CTA's, the most CTAs (0: the rule,
// tuning::normRowsOwnCtas; FC_ARNORM_ROW_CTAS, tuning::normRowCtas). stages: kNormFull in real calls
// (device/norm_stages.h).
fcResult_t launchAllReduceNormLamport(const DeviceComm& dc, int channel, const NormCall& call, bool pdl,
                                      uint32_t clusterPacks, bool wideCtas, uint32_t rowCtas, uint32_t stages,
                                      cudaStream_t stream, uint32_t sig = 0);

// Where a kernel other than a Rows kernel pushes for one (fcMatmulAllReduce's decode
// engine: its GEMM's epilogue pushes, then launchAllReduceNormLamport runs without
// kNormPush): sender's slot, as packs [tokens, hidden] row-major, in rank owner's Rows
// set of Lamport buffer `buffer` (0-2) of `channel` (lamport.cuh, LamportRun::slot), and
// this rank's Rows buffer index word, which names the buffer of the next Rows call.
void* lamportRowsSlot(const DeviceComm& dc, int channel, uint32_t buffer, int owner, int sender);
const uint32_t* lamportRowsIndex(const DeviceComm& dc, int channel);

// All-reduce + residual + RMSNorm as one two-shot kernel (allreduce_norm_twoshot.cu), at
// up to 4 ranks, any token count: rows in passes of allReduceNormTwoShotRows(), which
// is 0 when a row does not fit (hidden too large: take the unfused path). gatherSet: the
// communicator has FC_ARNORM_GATHER_SET's sets (DeviceComm::rowsGatherOffset), whose
// passes fill whole slots. alignPasses: where a call takes more than one pass, passes
// of whole rounds of the kernel's clusters (tuning::normTwoShotBlockRows;
// FC_ARNORM_PASS_ALIGN=0 turns it off).
size_t allReduceNormTwoShotRows(int nranks, size_t hidden, fcDataType_t datatype, bool gatherSet = false);
fcResult_t launchAllReduceNormTwoShot(const DeviceComm& dc, int channel, const NormCall& call, bool pdl,
                                      bool alignPasses, cudaStream_t stream, uint32_t sig = 0);

// residualOut = sum + residual, out = RMSNorm(residualOut) * weight, locally: the
// large path's second kernel after an all-reduce into `sum` (which may be call.out).
// fp32Sum: `sum` holds fp32 sums (16-byte aligned), added to the residual before the one
// rounding (fcMatmulAllReduce's decode kernel writes those). With fp32Sum the kernel
// prefetches the residual and the weight before griddepcontrol.wait: launch it only
// directly behind a kernel that allows dependents after its own griddepcontrol.wait (the
// decode kernel does), so that both are final when it starts. rowsPerCta: the rows a CTA
// holds at once (tuning::residualNormRowsPerCta; 0: by the rows' bytes; FC_NORM_LOCAL_ROWS),
// the same bits either way.
fcResult_t launchResidualNorm(const NormCall& call, const void* sum, bool pdl, cudaStream_t stream,
                              bool fp32Sum = false, int rowsPerCta = 0);

// Two-shot all-reduce (reduce-scatter + all-gather through the workspace regions);
// any count: sizes beyond the workspace run in passes. sig: as the one-shot's.
fcResult_t launchAllReduceTwoShot(const DeviceComm& dc, int channel, const void* sendbuff,
                                  void* recvbuff, size_t count, fcDataType_t datatype,
                                  const SymSource* symmetricIn, cudaStream_t stream, uint32_t sig = 0);

// Reduce-scatter of W blocks of recvcount elements; any count (passes).
fcResult_t launchReduceScatter(const DeviceComm& dc, int channel, const void* sendbuff,
                               void* recvbuff, size_t recvcount, fcDataType_t datatype,
                               const SymSource* symmetricIn, cudaStream_t stream);

// All-gather of sendcount elements per rank; any count (passes).
fcResult_t launchAllGather(const DeviceComm& dc, int channel, const void* sendbuff, void* recvbuff,
                           size_t sendcount, fcDataType_t datatype, const SymSource* symmetricIn,
                           cudaStream_t stream);

// Copy-engine reduce-scatter (after Triton-distributed's intra-node one): every rank pushes block d of its sendbuff
// into rank d's workspace with cudaMemcpyAsync on the channel's copy queue, a
// barrier, then a local SM reduce; passes through the two workspace slots (ce::kSlots),
// the pushes of a pass overlapping the reduce of the previous one. Any count.
fcResult_t launchReduceScatterCe(const DeviceComm& dc, int channel, CopyQueue& copies,
                                 const void* sendbuff, void* recvbuff, size_t recvcount,
                                 fcDataType_t datatype, cudaStream_t stream);

// Copy-engine all-gather (torch symm_mem's progress all-gather): every rank stages its sendbuff in its
// workspace (zero-copy: leaves it in its symmetric sendbuff), a barrier, then
// pulls every peer's block into recvbuff with cudaMemcpyAsync on the copy queue,
// rank-rotated; a departure barrier. Passes through the two workspace slots, the
// staging of a pass overlapping the pulls of the previous one. Any count.
fcResult_t launchAllGatherCe(const DeviceComm& dc, int channel, CopyQueue& copies, const void* sendbuff,
                             void* recvbuff, size_t sendcount, fcDataType_t datatype,
                             const SymSource* symmetricIn, cudaStream_t stream);

// Copy-engine all-reduce: launchReduceScatterCe into this rank's slice of recvbuff,
// then launchAllGatherCe in place. count must be a multiple of nranks.
fcResult_t launchAllReduceCe(const DeviceComm& dc, int channel, CopyQueue& copies, const void* sendbuff,
                             void* recvbuff, size_t count, fcDataType_t datatype, cudaStream_t stream);

// Device-side barrier of all ranks on `channel` (fcBarrier).
fcResult_t launchBarrier(const DeviceComm& dc, int channel, cudaStream_t stream);

// The same barrier on behalf of `op` (its signature is checked against the peers').
// letNextStart: a next kernel launched with programmatic stream serialization may start
// while this one waits for the peers (it must not read anything the barrier orders, and
// waits for this grid (griddepcontrol.wait) before it writes into a peer). clear: words
// (this rank's memory) zeroed before this rank arrives. recordMet: the outcome into the
// channel's barrierMetOf word (1: every peer met it with our signature, nobody had given
// up; device/device_comm.h), for a kernel behind it that must not write into a peer's
// memory otherwise.
fcResult_t launchOpBarrier(const DeviceComm& dc, int channel, Op op, uint32_t sig, cudaStream_t stream,
                           bool letNextStart = false, uint32_t* clear = nullptr, int clearWords = 0,
                           bool recordMet = false);

// Bytes of workspace the one-shot all-reduce needs for `bytes` of input.
size_t allReduceOneShotWorkspace(size_t bytes);

}  // namespace fc
