// The communicator: who we are (rank, world, device), the bootstrap connections,
// the symmetric heap with its signal pads and per-channel workspaces, the per-channel
// copy queues, GEMM handles and scratch, the issue order of its operations, and the
// host-mapped error record that device spin-waits write when they give up.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "comm/scratch.h"
#include "core/copy_queue.h"
#include "gemm/gemm.h"
#include "device/device_comm.h"
#include "device/norm_stages.h"
#include "fusedcomm.h"
#include "memory/symmetric_heap.h"
#include "tuning/algos.h"
#include "tuning/tuning.h"

namespace fc {

// FC_AGMM_ENGINE_STAGES: the all-gather + GEMM engine path with a stage left out, for
// timing it (fc-bench agmmstages), and the same stages of the pipeline in passes that
// a forced engine falls back to at shards beyond a workspace slot; anything but Full
// computes wrong results, and only the probe build takes it (comm/config.cc,
// checkMeasurementOnly).
enum class EngineStages {
  Full,    // pulls, flags, the GEMM waiting on them
  NoWait,  // the GEMM does not wait for the flags: it runs beside the pulls
  NoPull   // no remote pulls, the flags set at once: the GEMM and the fixed costs only
};
// FC_MMRS_ENGINE_STAGES: the GEMM + reduce-scatter engine path's flow, or its sum
// after the GEMM with a stage left out, for timing it (fc-bench mmrsstages); anything
// but Full and EpilogueAdd computes wrong results, and only the probe build takes it.
enum class MmrsEngineStages {
  Full,      // the GEMM signalling tiles, gates, pulls, the sum after it, the barrier
  NoGate,    // the pulls start without waiting for the peers' tiles
  NoPull,    // the gates but no pulls: the sum adds stale partials
  GemmOnly,  // neither gates nor pulls: the GEMM and the fixed costs (sum, barrier) only
  EpilogueAdd,  // the default: at 2 ranks the peer's partial read in place and added in the
                // GEMM's epilogue, at 3-8 ranks the chain of running sums where they fit
                // the workspace (fused/matmul_reduce_scatter.cc); elsewhere Full
  // 2 ranks, the epilogue add with our tiles adding a block of our own workspace instead
  // of the peer's, without waiting: the GEMM and the fixed costs, no NVLink traffic
  EpilogueLocal,
  // 2 ranks, the epilogue add with the partials pushed: the peer's block's tiles stored
  // into the peer's workspace (remote TMA stores, behind an entry barrier), ours adding
  // the peer's from our own workspace (fcMatmulAllReduce's engine without the gather);
  // correct where every rank's C is 16-byte aligned
  EpiloguePush
};

// FC_MMAR_ENGINE_STAGES: fcMatmulAllReduce's engine path (2 ranks, the GEMM with its
// reduce-scatter and all-gather in the epilogue) with a part left out, for timing it
// (fc-bench mmarstages); anything but Full computes wrong results, and only the probe
// build takes it.
enum class MmarEngineStages {
  Full,      // the entry barrier, the GEMM's pushes and waits, the copy of the peer's rows
  Local,     // every store the GEMM makes into the peer's workspace made into ours instead
             // (the NVLink traffic gone; the waits and signals stay)
  NoGather,  // our block's sums not pushed to the peer (the all-gather half gone)
  NoWait,    // our block's tiles do not wait for the peer's partials
  NoCopy,    // the peer's rows not copied into C after the GEMM (plain form)
  GemmOnly,  // Local + NoGather + NoWait + NoCopy: the engine's GEMM, the barriers
  Bare       // GemmOnly without the entry and final barriers and the counters' reset:
             // the engine's GEMM kernel alone, as the op launches it
};

// Resolved options: config fields, else env vars, else defaults.
struct CommParams {
  uint64_t timeoutMs = 120000;
  // 2 channels: 260 MiB per GPU. 130 rather than 128 MiB: a copy-engine slot (half
  // the workspace) then holds three 1/3 blocks of a 64 MiB-per-rank reduce-scatter
  // (a 256 MiB one at 4 ranks, or a 256 MiB all-reduce's first half). With 128 MiB
  // those need 4 passes, the last one of 2 elements (11 us more at 256 MiB).
  uint64_t workspaceBytes = 130ull << 20;
  int maxCtas = kMaxBlocks;
  // 2: eager ops on channel 0, captured ones on channel 1 (ops.cc); 1: both on one
  // (half the memory; graph replays must then be ordered against eager ops).
  int channels = 2;
  uint64_t scratchBytes = 0;  // FC_SCRATCH_BYTES: initial scratch per channel
  bool blocking = true;
  AllReduceAlgo allReduceAlgo = AllReduceAlgo::Auto;  // FC_ALLREDUCE_ALGO
  uint64_t lamportMaxBytes = 0;  // FC_LAMPORT_MAX_BYTES (0: tuning::lamportMaxBytes(nranks))
  // FC_LAMPORT_SPINS: a Lamport kernel's data polls that run back to back before each
  // round backs off with __nanosleep (collectives/lamport.cuh, pollPacks).
  uint32_t lamportSpins = 0;
  bool lamportSpinsSet = false;  // FC_LAMPORT_SPINS given (else tuning::normLamportSpins for the norm)
  MoveAlgo reduceScatterAlgo = MoveAlgo::Auto;  // FC_REDUCE_SCATTER_ALGO
  MoveAlgo allGatherAlgo = MoveAlgo::Auto;      // FC_ALLGATHER_ALGO
  FusedAlgo allGatherMatmulAlgo = FusedAlgo::Auto;  // FC_AGMM_ALGO (engine allowed)
  // FC_AGMM_ENGINE_PIECES: the all-gather + GEMM engine pulls each shard in this many
  // pieces of whole tile rows, each flagged, so that tiles wait for their rows only.
  int agmmEnginePieces = tuning::kAgmmEnginePieces;
  // FC_AGMM_ENGINE_KPIECES: 1, or 2-16 pieces of K columns for the pushed shards
  // (fused/fused.h, AllGatherMatmulArgs::engineKPieces); opt-in: measured behind or level
  // but at 1024 rows (its 2-D copies run on SMs; perf-log, thirty-second session).
  int agmmEngineKPieces = 1;
  // FC_AGMM_ENGINE_PUSH: ce (the default: the copy queue) or sm (a push kernel in front
  // of the GEMM; fused/shard_push.cu); opt-in: exact, slower than ce since the engine's
  // narrow tiles (design.md, "Small M").
  bool agmmEnginePushBySm = false;
  // FC_AGMM_ENGINE_TILES: the all-gather + GEMM engine's tile shape: auto (0, the rule:
  // tuning::allGatherEngineTileN), 128x256 (256), 128x224 (224), 128x192 (192), 128x160 (160),
  // 128x128 (128), 128x96 (96).
  int agmmEngineTileN = 0;
  // FC_MMRS_ENGINE_PIECES: the GEMM + reduce-scatter engine counts (and, summing after
  // the GEMM, pulls) each block in this many pieces of whole tile rows (1-16, fewer
  // where the block has fewer tile rows); 0 (unset), the tuning table's rule: up to
  // kMmrsEnginePieces, none smaller than its minimum (tuning::matmulReduceScatterEnginePieces).
  // Not in the op's signature: ranks must agree (for measurements).
  int mmrsEnginePieces = 0;
  // FC_MMRS_ENGINE_LEAD: at 2 ranks, the engine's epilogue add (both fused ops) hands its
  // tiles out with the two blocks' pieces interleaved, this many pieces of the peer's
  // block ahead of our first (gemm/engine/interleave.h); 0: the peer's block, then ours;
  // -1 (unset): the tuning rule (tuning::matmulReduceScatterInterleave: fcMatmulReduceScatter
  // at K <= 2048).
  int mmrsEngineLead = -1;
  EngineStages agmmEngineStages = EngineStages::Full;  // FC_AGMM_ENGINE_STAGES
  // FC_AGMM_PASSES (tuning/algos.h): push-own-first, the default, has fcAllGatherMatmul's
  // pipeline in passes (shards beyond a slot) at 2 ranks with no Agathered push our rows
  // into the peer's slot instead of staging them for the peer to pull, our own rows' GEMM
  // whole in front (fused/allgather_matmul.cc, pipelineInPassesPushed); push: our rows'
  // GEMM in passes too; pull: the staged form everywhere.
  AgmmPasses agmmPasses = AgmmPasses::PushOwnFirst;
  // FC_AGMM_AGATHERED: beside, the default, has fcAllGatherMatmul's engine path fill a
  // caller's Agathered beside its GEMM (fused/fused.h); front: in front of it.
  bool agmmAgatheredBeside = true;
  // ... stages: as beside, but with a plain A the GEMM's tiles of column 0 store their A
  // stages into it instead of the copy queue copying the rows (own_rows_mainloop.cuh).
  bool agmmAgatheredStages = false;
  // FC_AGMM_SYMMETRIC: push, the default, has fcAllGatherMatmul's engine path push a
  // symmetric A's shard into the peers' workspaces as it does a plain A's (no Agathered;
  // fused/fused.h); pull: the peers read it in place.
  bool agmmSymmetricPush = true;
  MmrsEngineStages mmrsEngineStages = MmrsEngineStages::EpilogueAdd;  // FC_MMRS_ENGINE_STAGES
  MmarEngineStages mmarEngineStages = MmarEngineStages::Full;          // FC_MMAR_ENGINE_STAGES
  int mmarEngineTileN = 0;  // FC_MMAR_ENGINE_TILES: auto (0), 128x128 (128), 128x256 (256)
  // FC_MMRS_ENGINE_TILES: fcMatmulReduceScatter's engine's tile shape, as above (probe
  // build only: it is not in the op's signature, and ranks that differ would count a
  // piece's tiles differently).
  int mmrsEngineTileN = 0;
  FusedAlgo matmulReduceScatterAlgo = FusedAlgo::Auto;  // FC_MMRS_ALGO (engine allowed)
  NormAlgo allReduceNormAlgo = NormAlgo::Auto;  // FC_ARNORM_ALGO
  MatmulAllReduceAlgo matmulAllReduceAlgo = MatmulAllReduceAlgo::Auto;  // FC_MMAR_ALGO
  GemvForm gemvForm = GemvForm::Auto;  // FC_GEMV_FORM (fused/gemv_all_reduce.cu)
  int gemvStages = -1;                 // FC_GEMV_STAGES (its rings of loads; -1: auto)
  int gemvRotate = -1;                 // FC_GEMV_ROTATE (each tile's batches from its own start)
  int gemvRowCopies = -1;              // FC_GEMV_ROW_COPIES (the MMA form's copies of B by rows)
  int gemvWarpsPerTile = -1;           // FC_GEMV_WARPS_PER_TILE (the warps splitting K for a tile)
  int gemvPrefetch = -1;               // FC_GEMV_PREFETCH (batches of B into L2 before the PDL wait)
  int gemvNorm = -1;                   // FC_GEMV_NORM (the norm forms' residual + RMSNorm inside the kernel)
  bool checkPointers = true;  // FC_CHECK_POINTERS (comm/pointers.h)
  bool mmrsFp32Partials = false;  // FC_MMRS_PARTIALS / config.fp32Partials
  // FC_SHARE_GPU=1: ranks may share a GPU. Their contexts then time-slice (no MPS), so
  // every cross-rank wait lasts up to a scheduling time slice: for running the multi-rank
  // tests on a one-GPU machine, never for measurements.
  bool shareGpu = false;
  // FC_ENGINE_SMS: the most SMs the GEMM engine's persistent grid takes (0: all of the
  // GPU), leaving the rest to concurrent work. Ranks of one process sharing a GPU
  // (fcCommInitAll listing it twice, FC_SHARE_GPU) need it for grids that wait on each
  // other to be resident together; with it set, the GEMM + reduce-scatter engine's
  // epilogue add may run there (fused/matmul_reduce_scatter.cc).
  int engineSms = 0;
  // FC_PDL: launch the kernels that support it (the Lamport all-reduces,
  // fcAllReduceResidualRMSNorm's, device/pdl.cuh; the all-gather + GEMM engine's GEMM)
  // with programmatic dependent launch.
  bool pdl = true;
  // FC_PDL_START_EDGE: a captured op's PDL kernel behind its own cuBLASLt GEMM also
  // depends on the op's start (comm/ops.cc, commDependOnStart); 0 leaves that edge out.
  bool pdlStartEdge = true;
  // FC_DECODE_GEMM=0: every GEMM of the fused ops through cuBLASLt, the decode GEMM
  // (src/gemm/decode) never (fc-bench's cuBLAS columns; a user's A/B test).
  bool decodeGemm = true;
  // FC_LAMPORT_STAGES: the Lamport one-shot's stages (device_comm.h, LamportStage);
  // anything but full only for timing them (fc-bench stages): wrong results, the
  // probe build only.
  uint32_t lamportStages = kLamportFull;
  // FC_ARNORM_CLUSTER_PACKS: the all-reduce + RMSNorm kernel spreads a row over a
  // thread block cluster of CTAs with this many 16-byte packs each (at most 8 CTAs;
  // TensorRT-LLM's 128); 0: one CTA per row; unset: kNormClusterPacksAuto (one CTA
  // while it holds the row, else 256 packs per CTA; device/norm_stages.h).
  uint32_t normClusterPacks = kNormClusterPacksAuto;
  // FC_ARNORM_WIDE_CTAS (1 by default): where the clusters have halved to CTAs whose share
  // of a row is over kThreads (512) packs, those CTAs get up to 992 data threads, one pack
  // each (TensorRT-LLM's way), instead of 512 of which some poll two packs one after the
  // other (tuning::normWideCtas); 0 turns it off (fc-bench normstages, column no-wide-ctas).
  bool normWideCtas = true;
  // FC_ARNORM_ROW_CTAS: where the one kernel gives each row one CTA, its most CTAs (rows in
  // turn beyond); 0 (the default): tuning::normRowsOwnCtas (a CTA every row past maxCtas
  // where all fit, else maxCtas). Past maxCtas the kernel built for two CTAs an SM, never
  // more CTAs than the device holds at once (tuning::normRowCtas); 1 to 1024 (128: maxCtas,
  // rows in turn, as before the rule).
  uint32_t normRowCtas = 0;
  // FC_ARNORM_GATHER_SET=1 (a measurement form): the all-reduce + RMSNorm two-shot kernel
  // pushes its all-gather half into a set of its own (lamportGatherBytes more Lamport
  // memory per channel), so that a pass takes a whole push slot per half: at 2 ranks 8 MiB
  // a pass instead of 4 (512 x 5120 in bf16 in one pass instead of two). Every rank must
  // set it the same (the heap's layout).
  bool normGatherSet = false;
  // FC_ARNORM_PASS_ALIGN (1 by default): the two-shot norm kernel's passes, where a call
  // takes more than one, of whole rounds of its clusters (tuning::normTwoShotBlockRows);
  // 0, for measurements (fc-bench arnorm with it set), passes as full as the slot allows.
  bool normPassAlign = true;
  // FC_NORM_LOCAL_ROWS: the rows a CTA of the local residual + RMSNorm kernel holds at
  // once (launchResidualNorm: the unfused path's second kernel, fcMatmulAllReduce's norm
  // forms); 0 (the default): tuning::residualNormRowsPerCta by the rows' bytes; 1, 2 or 4.
  int normLocalRows = 0;
  // FC_ARNORM_STAGES: the all-reduce + RMSNorm kernel's stages (device/norm_stages.h);
  // anything but full, no-prefetch, loop-row or full-measured only for timing them (fc-bench normstages), the
  // probe build only.
  uint32_t normStages = kNormFull;
};

// Resolve `config` (may be NULL) over the environment (FC_TIMEOUT_MS,
// FC_WORKSPACE_BYTES, FC_CHANNELS, FC_SCRATCH_BYTES, the FC_*_ALGO choices,
// FC_CHECK_POINTERS, FC_MMRS_PARTIALS, FC_SHARE_GPU) and the defaults; validate the struct header.
fcResult_t commParamsResolve(const fcConfig_t* config, CommParams* params);

// Where an op runs (ops.cc): its channel, and the capture it is part of, if any.
struct OpLane {
  int channel = 0;
  bool capturing = false;
  unsigned long long captureId = 0;
  unsigned long long streamId = 0;  // cudaStreamGetId
};

}  // namespace fc

struct fcComm {
  static constexpr uint32_t kAlive = 0x4d4d4f43;  // "COMM"; cleared by destroy
  uint32_t magic = kAlive;
  int rank = 0;
  int nranks = 0;
  int cudaDev = -1;
  int smCount = 0;  // multiprocessors of cudaDev
  fc::CommParams params;
  std::unique_ptr<fc::Bootstrap> bootstrap;
  std::unique_ptr<fc::SymmetricHeap> heap;
  fc::ErrorRecord* errorHost = nullptr;  // cudaHostAlloc'd, mapped
  fc::DeviceComm dev{};                  // kernel argument
  // Per channel c (a channel runs one op at a time; the two channels may run at once):
  // copies[c]: the internal stream for copy-engine transfers
  std::vector<std::unique_ptr<fc::CopyQueue>> copies;
  // gemms[c]: the cuBLASLt handle, workspace and plans
  std::vector<std::unique_ptr<fc::Gemm>> gemms;
  // scratch[c]: the fused ops' private device memory
  std::vector<std::unique_ptr<fc::Scratch>> scratch;
  // The last op of the eager sequence and of the current capture (ops.cc): its
  // stream's id, the capture it belonged to, and an event recorded after it.
  struct LastOp {
    unsigned long long streamId = 0;
    unsigned long long captureId = 0;
    bool issued = false;
    cudaEvent_t done = nullptr;
  };
  LastOp lastEager, lastCaptured;
  cudaEvent_t captureStart = nullptr;  // commMarkStart: where the captured op's work began
  // fcMemAlloc buffers, each with its place in the sequence of this communicator's
  // fcMemAlloc calls (the same on every rank: the calls are collective, in one order).
  struct UserHeap {
    uint64_t serial;
    std::unique_ptr<fc::SymmetricHeap> heap;
  };
  std::vector<UserHeap> userHeaps;
  uint64_t userHeapsMade = 0;
  cudaStream_t control = nullptr;        // for abort notices to peers

  // Asynchronous state: fcInProgress during a non-blocking init, then sticky once
  // something failed. `asyncMessage` is written before the release store of
  // `asyncError` and read after its acquire load.
  std::atomic<int> asyncError{fcSuccess};
  std::string asyncMessage;
  std::thread initThread;  // non-blocking init
};

namespace fc {

// Collective set-up of `comm` (rank, nranks set by the caller) on the calling
// thread's current device. On failure the caller destroys the half-made comm.
fcResult_t commInit(fcComm* comm, const UniqueIdBody& id, const CommParams& params);

// Wait for the device to finish this communicator's work, then free everything.
// With `abort`, first make every spin-wait of this comm give up and tell the peers.
fcResult_t commDestroy(fcComm* comm, bool abort);

// fcSuccess, fcInProgress (non-blocking init still running), or the sticky error
// (init failure, device timeout or abort) with its message as the last error.
fcResult_t commCheckAsync(fcComm* comm);

// The checks every op makes before it enqueues anything: the communicator is
// healthy, the current device and the stream's are its own. Then *lane, and on
// `stream` a wait for the previous op of the lane's sequence when that one ran on
// another stream (ops.cc: ops run in issue order).
fcResult_t commOpBegin(fcComm* comm, const char* fn, cudaStream_t stream, OpLane* lane);

// After the op's work is enqueued on `stream` (`res`: how that went, returned
// unless it was fcSuccess): mark its end for the next op of its sequence.
fcResult_t commOpEnd(fcComm* comm, const OpLane& lane, cudaStream_t stream, fcResult_t res);

// For a captured op whose kernel launched with PDL follows a cuBLASLt GEMM of the same
// op: commMarkStart before the GEMM, commDependOnStart between the GEMM and that kernel
// (ops.cc says why). Both do nothing outside capture.
fcResult_t commMarkStart(fcComm* comm, const OpLane& lane, cudaStream_t stream);
fcResult_t commDependOnStart(fcComm* comm, const OpLane& lane, cudaStream_t stream);

// *p = scratch of at least `bytes` for an op of `lane` (fcInvalidUsage naming the
// setting when it would have to grow during capture).
fcResult_t commScratch(fcComm* comm, const char* fn, const OpLane& lane, size_t bytes, void** p);

// Collective fcMemAlloc / local fcMemFree.
fcResult_t commMemAlloc(fcComm* comm, size_t bytes, void** ptr);
fcResult_t commMemFree(fcComm* comm, void* ptr);

// If [p, p+bytes) lies in one of this rank's fcMemAlloc buffers, *src says where
// every rank's copy of it is, and the result is true. serial (optional): which
// fcMemAlloc call of the communicator made the buffer (the same on every rank), for
// signatures in which ranks must agree on the buffer, not only on its offset.
bool commSymmetricSource(const fcComm* comm, const void* p, size_t bytes, SymSource* src,
                         uint64_t* serial = nullptr);

}  // namespace fc
