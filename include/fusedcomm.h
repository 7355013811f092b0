/*
 * fusedcomm.h - the public C ABI of libfusedcomm.
 *
 * libfusedcomm runs communication and fused compute+communication kernels on the
 * GPUs of one node (NVLink / NVSwitch). It is used the way NCCL is used:
 *
 *     rank 0: fcGetUniqueId(&id); hand the 128 bytes to every rank (any means)
 *     every rank: cudaSetDevice(local_rank);
 *                 fcCommInitRank(&comm, nranks, id, rank);
 *                 fcAllReduceOneShot(send, recv, count, fcBfloat16, fcSum, comm, stream);
 *                 ...
 *                 fcCommDestroy(comm);
 *
 * Every rank is one process driving one GPU. Ranks exchange cuMem (CUDA VMM)
 * allocations as POSIX file descriptors over a Unix-domain socket and map each
 * other's memory ("symmetric memory"); kernels synchronise through signal pads in
 * that memory.
 *
 * Beyond one node: a communicator's ranks must all run on one host. A job on several
 * nodes makes one communicator per node, of that node's ranks (tensor parallelism
 * inside the node), and communicates across nodes through NCCL (data or pipeline
 * parallelism); init over ranks of several hosts is refused (fcCommInitRank).
 *
 * ABI rules: this header compiles as C99 and as C++. Result codes and enum values
 * are only ever appended. Every exported symbol starts with "fc".
 *
 * Threading: a communicator is not thread-safe; calls on one communicator must be
 * serialised by the caller. Different communicators may be used from different
 * threads concurrently. fcGetLastError is per thread.
 *
 * Streams and CUDA graphs: collective calls are asynchronous. They enqueue work on
 * the caller's stream and return; buffers must stay valid until that work is done.
 * They may be captured into a CUDA graph and the graph replayed any number of times:
 * no host-side state is baked into a captured launch (synchronisation epochs live
 * in device memory). All ranks must issue the same collectives, with the same
 * counts and datatypes (and, for the fused ops, shapes), in the same order.
 *
 * Streams and ordering (NCCL's contract, with NCCL's implicit launch order built in):
 *   - Any stream of the communicator's device, any number of them, created at any
 *     time: the default stream, a new stream per call, the side stream of a graph
 *     capture, streams of several threads used one after another. Nothing is kept
 *     per stream, and no configuration is needed.
 *   - A communicator's operations run in the order they were issued on this rank,
 *     whatever streams carry them. An operation issued on another stream than the
 *     previous one first waits (cudaStreamWaitEvent, on the GPU) for the previous
 *     one to finish. So two operations issued on different streams with no
 *     dependency between them do not run concurrently: they run in issue order,
 *     which never deadlocks as long as every rank issues the same sequence. Work of
 *     the caller's on those streams is not delayed beyond that.
 *   - Operations issued eagerly form one sequence; operations captured into CUDA
 *     graphs form another, in capture order within each capture (the order holds
 *     across the capture's forked streams too). The two sequences use separate
 *     resources (config.channels = 2, the default), so a graph replay may run while
 *     eager operations run. The replays themselves are ordered by the caller, as
 *     with NCCL: every rank must replay its graphs in the same order, never two
 *     graphs of one communicator at once. With config.channels = 1 both sequences
 *     share one set of resources (half the memory), and graph replays must also be
 *     ordered against eager operations.
 *   - Ranks that break these rules (different operations, counts, dtypes or shapes
 *     at the same point) get fcInvalidUsage from fcCommGetAsyncError naming both
 *     ranks' calls where the op signatures differ, or fcTimeout once FC_TIMEOUT_MS
 *     passes: never a hang.
 *
 * Memory: a communicator holds, per channel (two by default), a workspace
 * (FC_WORKSPACE_BYTES, default 130 MiB), the Lamport push buffers (48 MiB at 2 ranks,
 * 12 * (nranks - 1) MiB beyond),
 * a 32 MiB cuBLASLt workspace and the fused ops' scratch, which grows to the largest
 * need of a fused op called so far (FC_SCRATCH_BYTES sets its size at init). None of
 * it grows with the number of streams, and no operation allocates memory once
 * scratch has its size.
 *
 * Buffers: every buffer an operation reads or writes must be memory that the
 * communicator's GPU can address: device memory of that GPU (cudaMalloc,
 * cudaMallocAsync, cuMem mappings, a CUDA tensor's data), managed memory
 * (cudaMallocManaged), or fcMemAlloc memory of the communicator. Host memory
 * (malloc, a CPU tensor's data), pinned host memory (cudaMallocHost, cudaHostAlloc,
 * cudaHostRegister), another GPU's memory and freed memory are refused with
 * fcInvalidArgument naming the argument, before anything is enqueued. The check
 * (one cudaPointerGetAttributes per buffer not from fcMemAlloc, a fraction of a
 * microsecond; at capture time only inside a CUDA graph) is skipped with
 * FC_CHECK_POINTERS=0. A count or shape whose buffer would exceed 2^48 bytes (or
 * wrap the address space) is refused as too large before the alignment, overlap and
 * pointer checks.
 *
 * Errors: every function returns an fcResult_t. On failure, fcGetLastError()
 * returns a message naming what was wrong; outputs are not touched when the
 * arguments are rejected (fcCommInitRank sets *comm to NULL on any failure).
 * Device-side failures (a peer that never arrives) make
 * the kernel give up after the communicator's timeout instead of hanging.
 */
#ifndef FUSEDCOMM_H_
#define FUSEDCOMM_H_

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FC_MAJOR 0
#define FC_MINOR 3
#define FC_PATCH 0
/* FC_VERSION_CODE == what fcGetVersion returns for this header. */
#define FC_VERSION_CODE (FC_MAJOR * 10000 + FC_MINOR * 100 + FC_PATCH)

/* Result codes. Values follow NCCL's where the meanings overlap; only appended. */
typedef enum {
  fcSuccess = 0,
  fcUnhandledCudaError = 1, /* a CUDA runtime/driver call failed (or no driver/GPU) */
  fcSystemError = 2,        /* an OS call failed (socket, fd, memory) */
  fcInternalError = 3,      /* a bug in libfusedcomm */
  fcInvalidArgument = 4,    /* a bad pointer, count, dtype, op, rank or unique id */
  fcInvalidUsage = 5,       /* a call that is wrong in this state (e.g. wrong device) */
  fcRemoteError = 6,        /* a peer failed or sent something unexpected */
  fcInProgress = 7,         /* a non-blocking operation has not finished yet */
  fcTimeout = 8,            /* a peer did not arrive within the timeout */
  fcNotSupported = 9,       /* the hardware or build cannot do this */
  fcNumResults = 10
} fcResult_t;

/* Element types; the values are NCCL's (ncclFloat16 = 6, ncclFloat32 = 7, ncclBfloat16 = 9). */
typedef enum {
  fcFloat16 = 6,
  fcFloat32 = 7,
  fcBfloat16 = 9
} fcDataType_t;

/* Reduction operators; values are NCCL's. */
typedef enum {
  fcSum = 0
} fcRedOp_t;

/* How a GEMM operand is used: as stored (N) or transposed (T). */
typedef enum {
  fcOpN = 0,
  fcOpT = 1
} fcOperation_t;

/* Opaque communicator handle. */
typedef struct fcComm* fcComm_t;

/* 128 opaque bytes made by fcGetUniqueId on one rank and given to all ranks.
 * Holds a random 128-bit secret: treat it as a credential. */
#define FC_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[FC_UNIQUE_ID_BYTES];
} fcUniqueId;

/* A static description of a result code ("invalid argument", ...). Never NULL. */
const char* fcGetErrorString(fcResult_t result);

/* The message of the last failed call made by this thread (any communicator; comm may
 * be NULL and is only used to prefix nothing today). "" when no call has failed yet.
 * The pointer stays valid until this thread's next fc* call. */
const char* fcGetLastError(fcComm_t comm);

/* *version = FC_MAJOR*10000 + FC_MINOR*100 + FC_PATCH of the loaded library.
 * Errors: fcInvalidArgument (version NULL). Needs no GPU. */
fcResult_t fcGetVersion(int* version);

/* Make a new unique id: a magic, a format version, a 128-bit random secret (from
 * getrandom), a random rendezvous name and this host's name and identity (see
 * fcCommInitRank). Call once, on one process, and give the same id to every rank of
 * the communicator; normally on rank 0's host. Needs no GPU.
 * Errors: fcInvalidArgument (uniqueId NULL), fcSystemError (no entropy source). */
fcResult_t fcGetUniqueId(fcUniqueId* uniqueId);

/* Create this rank's communicator; collective over nranks processes of this node.
 *   nranks: world size, 1 .. 16.   rank: 0 .. nranks-1, unique per process.
 *   id: the same fcUniqueId on every rank.
 * The GPU is the calling thread's current CUDA device (cudaSetDevice first).
 * Blocks until every rank has joined, or until the timeout (FC_TIMEOUT_MS, default
 * 120000 ms) expires; then returns fcTimeout and fcGetLastError names the missing ranks.
 * One host: ranks tell hosts apart by hostname and boot id
 * (/proc/sys/kernel/random/boot_id), or by FC_HOST_ID where it is set (the whole
 * identity: tests fake several hosts on one machine with it; containers of one machine
 * with different hostnames may set it alike). Ranks that meet but run on several hosts
 * all get fcInvalidUsage right after the rendezvous, before any GPU memory is made,
 * the message naming the hosts with their ranks and what to do; nothing is left
 * allocated or open. A rank on another host than rank 0 cannot reach it at all (the
 * rendezvous is a Unix socket of the node): at the timeout it gets fcInvalidUsage
 * naming its host and the id's maker's where they differ (else fcTimeout), and the
 * ranks that did join get fcTimeout naming it as missing.
 * Environment: FC_TIMEOUT_MS (bootstrap and device spin-wait deadline, ms),
 * FC_WORKSPACE_BYTES (symmetric workspace per rank, default 130 MiB, rounded up to
 * the allocation granularity), FC_HOST_ID (this process's host, above),
 * FC_DEBUG=WARN|INFO|TRACE, FC_DEBUG_FILE.
 * Errors: fcInvalidArgument (comm NULL, nranks < 1 or > 16, rank out of range, an id
 * not made by fcGetUniqueId), fcUnhandledCudaError (no driver, no GPU, a CUDA call
 * failed), fcNotSupported (the GPU lacks VMM / POSIX-fd handles), fcInvalidUsage
 * (ranks on several hosts, two ranks on one GPU, options that differ between ranks),
 * fcSystemError, fcRemoteError (a peer disagreed on nranks, or sent a bad message),
 * fcTimeout. */
fcResult_t fcCommInitRank(fcComm_t* comm, int nranks, fcUniqueId id, int rank);

/* Communicator options. Always start from FC_CONFIG_INITIALIZER: it records the size
 * and version of the struct this caller was compiled with, so that a library built
 * with more fields keeps working with it, and it sets every option to
 * FC_CONFIG_UNSET ("take the environment variable, else the default").
 * Fields are only ever appended. */
#define FC_CONFIG_UNSET (-1)
#define FC_CONFIG_MAGIC 0xFC0C0F16u
typedef struct {
  size_t size;            /* sizeof(fcConfig_t) of the caller: set by FC_CONFIG_INITIALIZER */
  unsigned int magic;     /* FC_CONFIG_MAGIC */
  unsigned int version;   /* FC_VERSION_CODE of the caller's header */
  int blocking;           /* 1 (default): init returns when done. 0: init returns fcInProgress
                           * at once with a handle; poll fcCommGetAsyncError until it is not
                           * fcInProgress (fcSuccess, or the init error) before using it. */
  int maxCtas;            /* most CTAs one communication kernel may use, 1..128 (default 128, env FC_MAX_CTAS) */
  int channels;           /* 2 (default, env FC_CHANNELS): eager and captured operations on
                           * separate signal slots, Lamport buffers, workspace and scratch;
                           * 1: shared (half the memory; then graph replays must be
                           * ordered against eager operations by the caller). 3..8 are
                           * accepted and mean 2 (before 0.2 a channel was per stream). */
  long long timeoutMs;    /* bootstrap and device wait deadline in ms (default 120000, env
                           * FC_TIMEOUT_MS) */
  long long workspaceBytes; /* symmetric workspace per channel per rank (default 130 MiB, env
                             * FC_WORKSPACE_BYTES); rounded up to 16 bytes */
  long long scratchBytes; /* since 0.2: device memory per channel for the fused ops'
                           * intermediate results, allocated at init (default 0, env
                           * FC_SCRATCH_BYTES; rounded up to a power of two, at least 2 MiB).
                           * An eager fused op that needs more grows it, once per new
                           * largest need; a captured one cannot (fcInvalidUsage, naming
                           * the size to set). fcAllGatherMatmul without Agathered needs
                           * M*K*sizeof(datatype); fcMatmulReduceScatter up to
                           * nranks * 65 MiB (at the default workspace). */
  int fp32Partials;       /* since 0.2: 1: fcMatmulReduceScatter's partial products travel
                           * and are summed unrounded, in fp32 (twice the bytes); 0
                           * (default, env FC_MMRS_PARTIALS=input|fp32): in the input
                           * type, each rank's rounded once, as cuBLAS + NCCL compute it. */
} fcConfig_t;
#define FC_CONFIG_INITIALIZER                                                           \
  { sizeof(fcConfig_t), FC_CONFIG_MAGIC, FC_VERSION_CODE, FC_CONFIG_UNSET, FC_CONFIG_UNSET, \
    FC_CONFIG_UNSET, FC_CONFIG_UNSET, FC_CONFIG_UNSET, FC_CONFIG_UNSET, FC_CONFIG_UNSET }

/* fcCommInitRank with options (config may be NULL: all defaults). Every rank must pass
 * the same maxCtas, channels and workspaceBytes (checked: fcInvalidUsage otherwise).
 * Errors: those of fcCommInitRank; fcInvalidArgument for a config whose magic is wrong,
 * whose size is smaller than the first version's or larger than this library's
 * fcConfig_t (a caller built against a newer header), or whose values are out of range.
 * Non-blocking (config->blocking == 0): returns fcInProgress and a handle at once; the
 * handle may only be passed to fcCommGetAsyncError, fcCommDestroy and fcCommAbort until
 * fcCommGetAsyncError reports fcSuccess. */
fcResult_t fcCommInitRankConfig(fcComm_t* comm, int nranks, fcUniqueId id, int rank,
                                fcConfig_t* config);

/* Create ndev communicators in this process, comms[i] being rank i on CUDA device
 * devlist[i] (devlist NULL: devices 0..ndev-1). Blocks until all are ready; on failure
 * none is left and every comms[i] is NULL. The caller's current device is unchanged.
 * Errors: fcInvalidArgument (comms NULL, ndev < 1 or > 16, a device out of range or
 * listed twice: allowed with FC_SHARE_GPU=1, for functional tests on one GPU), and
 * those of fcCommInitRank.
 * One thread may then issue every rank's operations, rank by rank, with one caveat:
 * a call can block inside CUDA until its device is idle - the first launch of a
 * cuBLASLt kernel (the fused GEMM ops: cuBLASLt loads a kernel at its first use; seen
 * with CUDA 13) and a call that grows scratch (cudaMalloc) - and the device is never
 * idle while an earlier op of that rank waits for a peer whose op this thread has not
 * issued yet. That op then times out (fcTimeout from fcCommGetAsyncError). Issue the
 * first call of each fused op and shape op by op (every rank's, then the next op), or
 * from one thread per device, and size scratch up front (config.scratchBytes).
 * libfusedcomm's own kernels never block so: every communicator loads all of them
 * into its device's context when it is made (CUDA drivers >= 12.5; older ones load
 * lazily, at first launch). */
fcResult_t fcCommInitAll(fcComm_t* comms, int ndev, const int* devlist);

/* Release the communicator: unmaps and frees its symmetric memory and closes its
 * sockets. Waits for this communicator's work on the device to finish first. Local:
 * does not wait for peers. comm must not be used afterwards. NULL: fcInvalidArgument. */
fcResult_t fcCommDestroy(fcComm_t comm);

/* Stop this communicator's kernels and free it without waiting for peers. Sets an
 * abort flag that every device spin-wait of this communicator polls (they leave within
 * about 0.1 ms), tells the peers' kernels that this rank aborted (they fail with
 * fcRemoteError instead of waiting for their timeout), waits for the device, then
 * frees everything like fcCommDestroy. comm must not be used afterwards.
 * Errors: fcInvalidArgument (NULL or destroyed comm). */
fcResult_t fcCommAbort(fcComm_t comm);

/* *asyncError = the communicator's asynchronous state: fcSuccess; fcInProgress while a
 * non-blocking init runs (then that init's result); fcTimeout when a kernel of this
 * communicator gave up waiting for a peer (FC_TIMEOUT_MS); fcRemoteError when it was
 * aborted, locally or by a peer. fcGetLastError then tells which op, rank, peer and
 * epochs. Once an error is reported every call on the communicator returns it; destroy
 * (or abort) it. Does not synchronise; cheap enough to poll.
 * Errors: fcInvalidArgument (NULL comm or asyncError). */
fcResult_t fcCommGetAsyncError(fcComm_t comm, fcResult_t* asyncError);

/* The world size, this rank, and the CUDA device ordinal (in this process) of comm. */
fcResult_t fcCommCount(const fcComm_t comm, int* count);
fcResult_t fcCommUserRank(const fcComm_t comm, int* rank);
fcResult_t fcCommCuDevice(const fcComm_t comm, int* device);

/* One-shot all-reduce: recvbuff[i] = sum over ranks of sendbuff[i], i < count, on
 * every rank.
 *   sendbuff, recvbuff: device memory of comm's GPU, count elements of datatype
 *     (sendbuff from fcMemAlloc, out of place: read by the peers in place, and the
 *     workspace limit below does not apply);
 *     sendbuff == recvbuff (in place) is allowed; other overlap is not. Any element
 *     alignment works; 16-byte aligned buffers take the vectorised path.
 *   datatype: fcBfloat16, fcFloat16 or fcFloat32. Sums are accumulated in fp32 and
 *     rounded once to datatype (round to nearest even).
 *   op: fcSum.
 *   count: 0 is a no-op; count * sizeof(datatype) must not exceed the communicator's
 *     workspace (FC_WORKSPACE_BYTES), else fcInvalidArgument with the limit.
 * Every rank receives every peer's whole input in one exchange and sums it (how, and
 * up to which size without barriers: docs/api.md, this function's section).
 * One kernel on stream; capturable; no host synchronisation. Kernels may be launched
 * with programmatic dependent launch (FC_PDL=0: never), so that their launch overlaps
 * the end of the previous kernel on stream, in graphs too.
 * Errors: fcInvalidArgument (NULL comm or buffers, a buffer that is not memory of
 * comm's GPU (see "Buffers" above), bad datatype/op, count too large), fcInvalidUsage (the current device is not comm's), fcUnhandledCudaError (launch). */
fcResult_t fcAllReduceOneShot(const void* sendbuff, void* recvbuff, size_t count,
                              fcDataType_t datatype, fcRedOp_t op, fcComm_t comm,
                              cudaStream_t stream);

/* All-reduce: recvbuff = the sum over ranks of sendbuff (count elements), on every rank,
 * with the algorithm chosen by size and world size (the same on every rank): the
 * one-shot above for small buffers, else a two-shot (a reduce-scatter, then an
 * all-gather of the reduced slices). FC_ALLREDUCE_ALGO=oneshot | twoshot |
 * twoshot-lamport | ce | auto (default) forces one for communicators created afterwards
 * (ce falls back to twoshot when count is not a multiple of nranks). The algorithms and
 * the thresholds of the automatic choice: docs/api.md, this function's section.
 * Arguments, dtypes, accumulation (fp32, one rounding), in-place use, stream and
 * graph semantics as fcAllReduceOneShot; any count (sizes beyond the workspace are
 * processed in passes). Same errors, except that the two-shot has no workspace
 * limit. */
fcResult_t fcAllReduce(const void* sendbuff, void* recvbuff, size_t count, fcDataType_t datatype,
                       fcRedOp_t op, fcComm_t comm, cudaStream_t stream);

/* All-reduce + residual add + RMSNorm, the sequence after the attention and MLP
 * blocks of a tensor-parallel transformer layer, fused:
 *   residualOut[t][h] = sum over ranks of sendbuff[t][h] + residual[t][h]
 *   normOut[t][h]     = residualOut[t][h] / sqrt(mean_h residualOut[t][h]^2 + eps) * weight[h]
 * for t < tokens, h < hidden, on every rank.
 *   sendbuff: this rank's partial sums, tokens x hidden, row-major (row stride hidden).
 *   residual: the residual stream (the same on every rank), tokens x hidden.
 *   weight: the RMSNorm weight (gamma), hidden elements.
 *   residualOut: tokens x hidden; residualOut == residual (in place) is allowed.
 *   normOut: tokens x hidden; overlaps no other buffer.
 *   All device memory of comm's GPU, 16-byte aligned; hidden * sizeof(datatype) a
 *   multiple of 16 bytes (hidden a multiple of 8 for 16-bit types, 4 for fp32).
 *   tokens: 0 is a no-op. eps: finite, >= 0 (1e-5 or 1e-6 in Llama and Qwen).
 *   datatype: fcBfloat16, fcFloat16 or fcFloat32, for every buffer.
 * Precision: on the one-kernel path (most small calls) the rank sum and the residual are
 * added in fp32 and rounded once to residualOut; on the other paths the all-reduce's
 * sum is rounded first (as a separate all-reduce then add would). The mean square is taken in
 * fp32 over the rounded residualOut, as a separate RMSNorm of it would; normOut is
 * rounded once. Every rank gets the same bits.
 * Paths, by size (the same on every rank): one kernel for small calls, a two-shot
 * kernel or the all-reduce then a local norm beyond; FC_ARNORM_ALGO=fused (the one
 * kernel where the call fits its buffers) | twoshot (the two-shot kernel where it runs) |
 * unfused | auto (default). Which path runs
 * where: docs/api.md, this function's section.
 * With FC_PDL=1 (the default) the kernels are launched with programmatic dependent
 * launch, so that their launch overlaps the end of the previous kernel on stream (also
 * inside CUDA graphs). Asynchronous on stream; capturable; no host synchronisation.
 * Ranks calling with a different shape (tokens, hidden) or datatype at the same point
 * are caught on the device, as mismatched all-reduces are (sticky fcInvalidUsage from
 * the next call and fcCommGetAsyncError), instead of summing misaligned rows.
 * Errors: fcInvalidArgument (NULL comm or buffers, a buffer that is not memory of comm's
 * GPU, bad datatype, hidden 0 or not a multiple of 16 bytes, misaligned buffers,
 * overlapping outputs, eps negative or not finite, sizes that overflow), fcInvalidUsage
 * (the current device is not comm's), fcUnhandledCudaError (launch). */
fcResult_t fcAllReduceResidualRMSNorm(const void* sendbuff, const void* residual, const void* weight,
                                      void* residualOut, void* normOut, size_t tokens, size_t hidden,
                                      float eps, fcDataType_t datatype, fcComm_t comm,
                                      cudaStream_t stream);

/* fcAllReduceResidualRMSNorm with the normed rows quantised to fp8 (e4m3) for an fp8
 * GEMM that follows (a per-tensor scale, as torch._scaled_mm takes it):
 *   normOutFp8[t][h] = e4m3(RMSNorm(residualOut)[t][h] * weight[h] / *scale),
 * rounded once to nearest even, saturated to +-448 (NaN stays NaN); residualOut as
 * above; no normOut in datatype.
 *   normOutFp8: tokens x hidden bytes, 16-byte aligned, overlapping no other buffer.
 *   scale: one float in device memory (read by the kernel when it runs, so a graph
 *     replay sees its current value), 4-byte aligned, > 0.
 * Everything else (shapes, dtypes, paths, PDL, graphs, mismatches) as
 * fcAllReduceResidualRMSNorm. The unfused path's all-reduce goes through the
 * communicator's scratch (tokens * hidden * sizeof(datatype) bytes; config.scratchBytes):
 * an eager call grows it once, a captured call that finds it too small fails with
 * fcInvalidUsage naming the size, as the fused GEMM ops do.
 * Errors: as fcAllReduceResidualRMSNorm, plus fcInvalidArgument for a NULL or
 * misaligned scale. */
fcResult_t fcAllReduceResidualRMSNormFp8(const void* sendbuff, const void* residual, const void* weight,
                                         void* residualOut, void* normOutFp8, const float* scale, size_t tokens,
                                         size_t hidden, float eps, fcDataType_t datatype, fcComm_t comm,
                                         cudaStream_t stream);

/* Reduce-scatter: recvbuff (recvcount elements) on rank r = the sum over all ranks of
 * elements [r*recvcount, (r+1)*recvcount) of their sendbuff (nranks*recvcount
 * elements). In place when recvbuff == sendbuff + rank*recvcount (NCCL's convention);
 * other overlap is refused. fp32 accumulation, one rounding. Any recvcount (passes
 * beyond the workspace). The algorithm (a Lamport push kernel, an SM pull kernel or
 * copy-engine transfers) is chosen by size and world size, the same on every rank;
 * FC_REDUCE_SCATTER_ALGO=lamport | sm | ce | auto (default) forces one (lamport only
 * where a block fits its buffer). Which runs where: docs/api.md, this function's
 * section.
 * Asynchronous on stream; capturable (the copy-engine variant forks an internal
 * stream and joins it back before returning). Errors as fcAllReduce. */
fcResult_t fcReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                           fcDataType_t datatype, fcRedOp_t op, fcComm_t comm,
                           cudaStream_t stream);

/* All-gather: recvbuff (nranks*sendcount elements) = every rank's sendbuff (sendcount
 * elements), in rank order, on every rank. In place when sendbuff == recvbuff +
 * rank*sendcount; other overlap is refused. Any sendcount (passes beyond the
 * workspace). Exact copies (every bit kept). The algorithm (an SM kernel or
 * copy-engine transfers) is chosen by output size, the same on every rank;
 * FC_ALLGATHER_ALGO=sm | ce | auto (default) forces one. Which runs where:
 * docs/api.md, this function's section.
 * Asynchronous on stream; capturable (the copy-engine variant forks an internal
 * stream and joins it back). Errors as fcAllReduce (no op argument). */
fcResult_t fcAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                       fcDataType_t datatype, fcComm_t comm, cudaStream_t stream);

/* Symmetric memory. Collective: every rank calls it with the same `bytes`, in the same
 * order relative to its other fcMemAlloc calls. Allocates `bytes` (rounded up to the
 * allocation granularity, 2 MiB on H200) of device memory on every rank's GPU, maps
 * every rank's allocation into every rank, and returns this rank's address in *ptr
 * (aligned to the granularity, contents zeroed). Collectives whose sendbuff lies in
 * such a buffer (16-byte aligned offset) and is not also recvbuff read it from the
 * peers directly: no staging copy, and no workspace size limit.
 * Errors: fcInvalidArgument (NULL comm/ptr, bytes 0 or over 2^48), fcInvalidUsage
 * (wrong device; ranks asking for different sizes), fcUnhandledCudaError (out of
 * memory), fcTimeout / fcRemoteError (a peer did not take part). */
fcResult_t fcMemAlloc(fcComm_t comm, void** ptr, size_t bytes);

/* Release a buffer from fcMemAlloc of this communicator. Local: peers that still map
 * it keep the memory alive until they free it too. Waits for the device to finish
 * using it. Errors: fcInvalidArgument (NULL comm, ptr not from fcMemAlloc(comm)). */
fcResult_t fcMemFree(fcComm_t comm, void* ptr);

/* Device-side barrier: work enqueued on `stream` after it starts only when every rank
 * has enqueued and reached its fcBarrier (an eager one meets the peers' eager ones,
 * a captured one their captured ones). One small kernel, no host synchronisation;
 * capturable. Errors: fcInvalidArgument (NULL comm), fcInvalidUsage (wrong device),
 * asynchronous errors. */
fcResult_t fcBarrier(fcComm_t comm, cudaStream_t stream);

/* All-gather + matmul (tensor-parallel input layer): every rank computes
 *   C = allgather(A) x op(B)
 * with the all-gather hidden under the GEMM.
 *   A: this rank's shard, [M/nranks, K] row-major, contiguous: rows
 *      [rank*M/nranks, (rank+1)*M/nranks) of the gathered [M, K] matrix.
 *   B: [K, N] row-major when transB == fcOpN; [N, K] row-major (a torch.nn.Linear
 *      weight) when transB == fcOpT. Each rank passes its own B (usually the same).
 *   C: [M, N] row-major, on every rank.
 *   Agathered: NULL, or [M, K] row-major that receives the gathered A. In place when
 *      A == Agathered + rank*(M/nranks)*K.
 *   M: the global row count, a multiple of nranks; M, N, K > 0. datatype: fcBfloat16
 *   or fcFloat16 (inputs and output), fp32 accumulation. Pointers aligned
 *   to the element size (16 bytes or more is faster).
 * Paths (the cuBLASLt pipeline, in passes of rows where a shard is larger than half
 * the workspace; the persistent GEMM engine; or all-gather then one GEMM) are chosen
 * per shape, world size and SM count, the same on every rank;
 * FC_AGMM_ALGO=pipeline (old spelling: fused) | engine | unfused | auto (default)
 * forces one for communicators created afterwards (a forced engine that cannot take
 * the shape runs the pipeline). The paths and the choice: docs/api.md, this
 * function's section.
 * Without Agathered the peers' shards land in the communicator's scratch (M*K
 * elements; config.scratchBytes): an eager call grows it once if it is smaller, a
 * captured call then fails with fcInvalidUsage (nothing enqueued) naming the size.
 * Asynchronous on stream; CUDA-graph capturable; safe back to back; ordered with the
 * communicator's other ops like every op (see "Streams and ordering"). Collective:
 * every rank calls it with the same M, N, K, transB and datatype (a different shape
 * is caught: the signature carries a hash of it), and alike with or without
 * Agathered and with A in symmetric memory or not: where ranks differ in these and
 * that changes how the rows move between them, the signature (which carries the path)
 * catches it too, as fcInvalidUsage naming both calls.
 * Errors: fcInvalidArgument (NULL comm or pointer, a pointer that is not memory of
 * comm's GPU (see "Buffers" above), M not a multiple of nranks, a zero or
 * overflowing dimension or a matrix over 2^48 bytes, dtype not bf16/fp16, bad
 * transB, misaligned or overlapping buffers; nothing is written), fcNotSupported (cuBLASLt has no algorithm
 * for the shape), fcInvalidUsage (wrong device; scratch too small during capture),
 * asynchronous errors as fcAllReduce. */
fcResult_t fcAllGatherMatmul(const void* A, const void* B, void* C, void* Agathered, size_t M, size_t N,
                             size_t K, fcOperation_t transB, fcDataType_t datatype, fcComm_t comm,
                             cudaStream_t stream);

/* Matmul + reduce-scatter (tensor-parallel output layer): every rank multiplies its
 * own A by its own op(B); the partial products are summed over ranks and scattered
 * by rows:
 *   C (on rank r) = rows [r*M/nranks, (r+1)*M/nranks) of  sum over ranks of A x op(B)
 *   A: [M, K] row-major, contiguous, this rank's operand.
 *   B: [K, N] row-major (fcOpN) or [N, K] row-major (fcOpT, a torch.nn.Linear weight).
 *   C: [M/nranks, N] row-major.
 *   M a multiple of nranks; M, N, K > 0; datatype fcBfloat16 or fcFloat16.
 * Precision: each rank's partial product A x op(B) is accumulated in fp32 and, by
 * default, rounded once to datatype (what a cuBLAS GEMM followed by an NCCL
 * reduce-scatter computes); the sum over ranks is accumulated in fp32 and rounded
 * once: |C - exact| is at most nranks/2 units in the last place (in datatype) of the
 * largest partial, plus the final rounding. config.fp32Partials = 1 (env FC_MMRS_PARTIALS=fp32) keeps the partials in
 * fp32 instead: only the final rounding (at twice the bytes moved).
 * Paths (the cuBLASLt pipeline, the persistent GEMM engine, or unfused forms: GEMM
 * then a reduce-scatter of the partials) are chosen per shape, world size and SM count,
 * the same on every rank; FC_MMRS_ALGO=pipeline (old spelling: fused) | engine |
 * unfused | auto (default) forces one (where it cannot run, the next of engine,
 * pipeline, unfused). The partials live in the communicator's scratch or its symmetric
 * workspace (how much each path needs: docs/api.md, this function's section;
 * config.scratchBytes),
 * grown as for fcAllGatherMatmul. Asynchronous on stream; CUDA-graph capturable; safe
 * back to back; ordered with the communicator's other ops. Collective (same M, N, K, transB,
 * datatype and partials type on every rank).
 * Errors: as fcAllGatherMatmul (C must not overlap A or B). */
fcResult_t fcMatmulReduceScatter(const void* A, const void* B, void* C, size_t M, size_t N, size_t K,
                                 fcOperation_t transB, fcDataType_t datatype, fcComm_t comm,
                                 cudaStream_t stream);

/* Matmul + all-reduce (the row-parallel layer of Megatron-style tensor parallelism:
 * o_proj, down_proj): every rank multiplies its own A by its own op(B) and gets the
 * sum over ranks of the products:
 *   C = sum over ranks of A x op(B), on every rank
 *   A: [M, K] row-major, contiguous, this rank's operand (its slice of the
 *      activations' columns).
 *   B: [K, N] row-major (fcOpN) or [N, K] row-major (fcOpT, a torch.nn.Linear
 *      weight: this rank's slice of its columns).
 *   C: [M, N] row-major; overlaps neither A nor B. C may lie in symmetric memory
 *      (fcMemAlloc of comm, a 16-byte aligned offset): then, where the persistent GEMM
 *      runs at 2 ranks (large M), the peer stores its rows of the sum straight into it
 *      and no copy follows. Every rank then passes C at the same offset of the buffer
 *      from the same fcMemAlloc call, or every rank a plain one; ranks that differ meet
 *      a mismatch there (fcInvalidUsage) and nothing is written into the peers' memory.
 *   M, N, K > 0 (M any count: no multiple of nranks needed); datatype fcBfloat16 or
 *   fcFloat16 for A, B and C. Pointers aligned to the element size; 16 bytes or more
 *   is faster, and every buffer needs the same alignment class (16-byte aligned or
 *   not) on every rank: otherwise the ranks may take different paths, which is
 *   reported as a mismatched call (fcInvalidUsage, as for a different shape).
 * Precision: each rank's product is accumulated in fp32 and rounded once to datatype
 * (what a cuBLAS GEMM followed by an NCCL all-reduce computes); the sum over ranks is
 * accumulated in fp32 and rounded once: |C - exact| is at most nranks/2 units in the
 * last place (in datatype) of the largest product, plus the final rounding. Every rank
 * gets the same bits.
 * The path is a function of the shape, the world size and the SM count, the same on
 * every rank (docs/design.md, "GEMM + all-reduce"): decode rows run one kernel that
 * reads B once and hands each tile's partial to the peers as soon as it is computed;
 * large M at 2 ranks one persistent GEMM that reduce-scatters and all-gathers from its
 * epilogue; other shapes the GEMM and then fcAllReduce's algorithm on its output, with
 * no copy in between (the GEMM cuBLASLt's, or where few rows meet a long K with fcOpT a
 * CUTLASS kernel of ours; FC_DECODE_GEMM=0 at communicator creation keeps cuBLASLt's:
 * docs/design.md, "The decode GEMM"). FC_MMAR_ALGO = unfused (the GEMM, then the all-reduce) | fused (the
 * one kernel where the shape allows it, else the GEMM's reduce-scatter as
 * fcMatmulReduceScatter computes it, then an all-gather) | engine (that reduce-scatter
 * on fcMatmulReduceScatter's persistent GEMM engine, with the all-gather in the same
 * GEMM at 2 ranks, else after it) | decode (at 2 ranks, B^T, every form at up to 256 rows
 * whose tiles fit one wave of the SMs (to 48 rows) or three (above): a CUTLASS GEMM whose
 * epilogue pushes each tile's partial into the peer, the all-reduce + RMSNorm kernel sums
 * them; else auto's path) | auto
 * (default) forces a path for communicators created afterwards, where the shape allows
 * it.
 * Scratch: none, except where the fused paths' reduce-scatter needs it (as
 * fcMatmulReduceScatter; config.scratchBytes, grown as for fcAllGatherMatmul).
 * Asynchronous on stream; CUDA-graph capturable; safe back to back; ordered with the
 * communicator's other ops. Collective: every rank calls it with the same M, N, K,
 * transB and datatype (a different shape is caught on the device, as a mismatched
 * all-reduce is).
 * Errors: fcInvalidArgument (NULL comm or pointer, a pointer that is not memory of
 * comm's GPU, a zero or overflowing dimension or a matrix over 2^48 bytes, dtype not
 * bf16/fp16, bad transB, misaligned or overlapping buffers; nothing is written),
 * fcNotSupported (cuBLASLt has no algorithm for the shape), fcInvalidUsage (wrong
 * device; scratch too small during capture), asynchronous errors as fcAllReduce.
 * Since 0.3. */
fcResult_t fcMatmulAllReduce(const void* A, const void* B, void* C, size_t M, size_t N, size_t K,
                             fcOperation_t transB, fcDataType_t datatype, fcComm_t comm, cudaStream_t stream);

/* Matmul + all-reduce + residual add + RMSNorm: the whole row-parallel linear ->
 * fused_add_rms_norm chain of a tensor-parallel decoder layer in one call:
 *   sum[t][h]         = sum over ranks of (A x op(B))[t][h]
 *   residualOut[t][h] = sum[t][h] + residual[t][h]
 *   normOut[t][h]     = residualOut[t][h] / sqrt(mean_h residualOut[t][h]^2 + eps) * weight[h]
 * for t < M (tokens), h < N (hidden), on every rank.
 *   A, B, M, N, K, transB, datatype: as fcMatmulAllReduce (the products' precision
 *   too).
 *   residual, weight, residualOut, normOut: as fcAllReduceResidualRMSNorm with
 *   tokens = M and hidden = N (16-byte aligned; N * sizeof(datatype) a multiple of 16
 *   bytes; residualOut == residual, in place, allowed; normOut overlaps nothing), none
 *   of them overlapping A or B. eps: finite, >= 0.
 * Precision: the sum over ranks and the residual as fcAllReduceResidualRMSNorm computes
 * them from sendbuff = each rank's rounded product: decode rows add the rank sum and
 * the residual in fp32 and round once; larger calls may round the sum first. Every
 * rank gets the same bits.
 * Paths, scratch, streams, graphs, FC_MMAR_ALGO, collectiveness and errors as
 * fcMatmulAllReduce, plus fcAllReduceResidualRMSNorm's argument errors. Since 0.3. */
fcResult_t fcMatmulAllReduceResidualRMSNorm(const void* A, const void* B, const void* residual, const void* weight,
                                            void* residualOut, void* normOut, size_t M, size_t N, size_t K,
                                            float eps, fcOperation_t transB, fcDataType_t datatype,
                                            fcComm_t comm, cudaStream_t stream);

/* fcMatmulAllReduceResidualRMSNorm with the normed rows quantised to fp8 (e4m3) with a
 * per-tensor scale, as fcAllReduceResidualRMSNormFp8 computes them:
 *   normOutFp8[t][h] = e4m3(RMSNorm(residualOut)[t][h] * weight[h] / *scale)
 *   normOutFp8: M x N bytes, 16-byte aligned, overlapping no other buffer.
 *   scale: one float in device memory (read when the kernel runs), 4-byte aligned, > 0.
 * The products pass through the communicator's scratch where they do not fit half of
 * its workspace (M * N * sizeof(datatype) bytes; config.scratchBytes, grown as for
 * fcAllGatherMatmul). Everything else as fcMatmulAllReduceResidualRMSNorm. Since 0.3. */
fcResult_t fcMatmulAllReduceResidualRMSNormFp8(const void* A, const void* B, const void* residual,
                                               const void* weight, void* residualOut, void* normOutFp8,
                                               const float* scale, size_t M, size_t N, size_t K, float eps,
                                               fcOperation_t transB, fcDataType_t datatype, fcComm_t comm,
                                               cudaStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FUSEDCOMM_H_ */
