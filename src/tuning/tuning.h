// Every automatic choice of the library in one place, as NCCL keeps its in
// src/graph/tuning.cc: the thresholds are a labelled table in tuning.cc (one row each:
// value, one-line reason, where it was measured), and the functions below are the only
// readers. Callers pass what the choice depends on (world size, SM count, shape,
// bytes, what fits); nothing here knows the communicator or assumes a GPU.
//
// To add a choice: a row (or a few) in tuning.cc's table with its reason and its
// measurement (docs/perf-log.md, "Tuning table", or docs/results/...), a function here
// that takes plain values, a case in tests/cpu/test_tuning.cc at 2 / 4 / 8 ranks and
// 132 / 114 SMs, and the call in the op. docs/design.md, "Tuning".
#pragma once

#include <cstddef>
#include <cstdint>

#include "tuning/algos.h"

namespace fc::tuning {

// ---- Defaults of the engine's piece counts (comm/comm.h's CommParams) -------------
// FC_AGMM_ENGINE_PIECES: 2 pieces measured as fast or faster on 2 H200s, to become the
// default once the GPU suite has run with it on 2 GPUs (perf-log.md, "Tuning table").
constexpr int kAgmmEnginePieces = 1;
// FC_MMRS_ENGINE_PIECES: until timed on 2 GPUs.
constexpr int kMmrsEnginePieces = 4;
// FC_AGMM_ENGINE_PUSH=sm: the push kernel's CTAs (512 threads each). Not yet measured:
// the push-rate probe moved 4 MiB a direction at its peak from 66 CTAs up; a one-wave
// GEMM of 96 tiles leaves 36 of 132 SMs idle, and a push of a few MiB needs ~16-32.
constexpr int kAgmmPushCtas = 32;

// ---- All-reduce (fcAllReduce, fcAllReduceOneShot) ------------------------------------
// Auto one-shot up to this many bytes, a two-shot beyond.
size_t oneShotMaxBytes(int nranks);
// The one-shot runs the Lamport protocol (no barriers) up to this many bytes.
size_t lamportMaxBytes(int nranks);
// Whether auto takes the Lamport two-shot for everything above the one-shot.
bool lamportTwoShotAuto(int nranks);
// The copy engine from this many bytes of the all-reduce buffer (where no Lamport
// two-shot runs).
size_t ceAllReduceMinBytes(int nranks);

struct AllReduceQuery {
  AllReduceAlgo forced = AllReduceAlgo::Auto;  // FC_ALLREDUCE_ALGO
  int nranks = 1;
  size_t count = 0;          // elements
  size_t bytes = 0;          // count * element size
  bool oneShotFits = false;  // zero-copy input, or the staged input fits the workspace
};
// fcAllReduce's algorithm (never Auto). A forced one-shot is returned as such (the
// caller checks that it fits); a forced copy engine needs count % nranks == 0.
AllReduceAlgo chooseAllReduce(const AllReduceQuery& q);

// Whether the Lamport one-shot places its CTAs one to an SM (DeviceComm::soloSmemBytes),
// so that the next call's CTAs, launched early under PDL, cannot sit beside them: where
// its data threads own kLamportSoloPacks packs or more (`packsPerThread`, the most any
// thread owns).
bool lamportSoloCtas(size_t packsPerThread);

// Whether the Lamport one-shot runs its wide CTAs (up to wideThreads data threads, 992: the
// kernel built for 1024 threads) for a call whose CTAs own `packsPerCta` packs each: where
// that is more than its other CTAs' ctaThreads (512) and every data thread then gets one.
bool lamportWideCtas(size_t packsPerCta, size_t ctaThreads, size_t wideThreads);

// Whether a one-shot of `bytes` runs the Lamport kernel: up to lamportMaxBytes (or
// `maxOverride`, FC_LAMPORT_MAX_BYTES, when not 0), unless the barrier one-shot is forced.
bool oneShotIsLamport(int nranks, size_t bytes, uint64_t maxOverride, AllReduceAlgo forced);

// ---- Reduce-scatter and all-gather ------------------------------------------------------
// The copy engine from these sizes on (bytes of the reduce-scatter's input, of the
// all-gather's output).
size_t ceReduceScatterMinBytes(int nranks);
size_t ceAllGatherMinBytes(int nranks);
// fcReduceScatter's kernel for `block` bytes of output per rank (`total` of input):
// `forced` where forced (Lamport only where the block fits its push slot, else Sm),
// else the Lamport kernel up to its push slot at 2-4 ranks, the copy engine from
// ceReduceScatterMinBytes, the SM kernel between. (No Lamport all-gather for
// fcAllGather: a copy must keep every bit, and the Lamport protocol turns all-ones
// words into other NaNs.)
MoveAlgo chooseReduceScatter(int nranks, MoveAlgo forced, size_t block, size_t total);
// fcAllGather's kernel for `bytes` of output: Sm or CopyEngine.
MoveAlgo chooseAllGather(int nranks, MoveAlgo forced, size_t bytes);

// ---- All-reduce + residual + RMSNorm (fcAllReduceResidualRMSNorm) -----------------------
// One Lamport kernel up to this many bytes (auto), of up to this many rows of rowBytes
// (2 ranks: 384, 640 for rows of up to 4 KiB; no limit beyond) ...
size_t allReduceNormOneKernelMaxBytes(int nranks);
size_t allReduceNormOneKernelMaxRows(int nranks, size_t rowBytes = 0);
// ... and above this many for rows of rowBytes (0 at 2 ranks, and at 3-4 for rows of 16
// KiB and more; beyond, 256 KiB: below it the one-shot + the norm kernel are ahead).
size_t allReduceNormOneKernelAboveBytes(int nranks, size_t rowBytes = 0);
// Whether auto takes the two-shot kernel above the one kernel (else the unfused path).
bool allReduceNormTwoShotAuto(int nranks);

struct NormQuery {
  NormAlgo forced = NormAlgo::Auto;  // FC_ARNORM_ALGO
  int nranks = 1;
  size_t bytes = 0;                  // tokens * hidden * element size
  size_t rows = 0;                   // tokens
  uint64_t maxOverride = 0;          // FC_LAMPORT_MAX_BYTES (0: the table's)
  bool twoShotFits = false;          // a row fits half a push slot (allReduceNormTwoShotRows > 0)
};
NormPath chooseAllReduceNorm(const NormQuery& q);

// The two-shot kernel's CTAs per row (a thread block cluster) for blocks of blockRows
// rows of rowPacks 16-byte packs on a grid of at most maxCtas CTAs: 1, 2, 4 or 8.
unsigned normTwoShotClusterCtas(size_t blockRows, size_t rowPacks, size_t maxCtas);

// The two-shot kernel's rows of a rank's block per pass, for `tokens` rows at nranks
// ranks where a pass's block holds at most blockCap rows (half a push slot): blockCap,
// or (aligned) the most multiple of the kernel's clusters (a cluster of
// normTwoShotClusterCtas CTAs per row) up to blockCap where that gives a CTA fewer rows
// of the call: a block's rows go to the clusters in turn, starting again at cluster 0
// in every pass, so passes of 204-row blocks on 128 clusters give clusters 0-75 a row
// more than the rest in each. Where both give as many, blockCap: fewer passes, each of
// which costs a round trip. aligned false: blockCap (FC_ARNORM_PASS_ALIGN=0, for
// measurements).
size_t normTwoShotBlockRows(size_t tokens, int nranks, size_t blockCap, size_t rowPacks, size_t maxCtas,
                            bool aligned = true);

// FC_ARNORM_CLUSTER_PACKS' default: 0 (one CTA per row) while one CTA's data threads
// hold the row one pack each, or, with wideCtas (FC_ARNORM_WIDE_CTAS), while a wide CTA
// does so for rows of up to 640 packs; else clusters of this many 16-byte packs per CTA.
uint32_t normClusterPacks(size_t rowPacks, size_t ctaThreads, bool wideCtas);

// The all-reduce + RMSNorm's one kernel's data polls before its first back-off, for
// `tokens` rows: the communicator's (FC_LAMPORT_SPINS) where it was given, else a few
// rounds back to back up to a number of rows, and the communicator's default beyond.
uint32_t normLamportSpins(size_t tokens, uint32_t commSpins, bool commSpinsSet);

// Whether a CTA of the one kernel whose share of a row is `sharePacks` 16-byte packs
// (after its clusters halved to fit maxCtas) gets one data thread per pack past
// ctaThreads (the usual 512), up to wideThreads (992: 1024 with the call warp).
bool normWideCtas(size_t sharePacks, size_t ctaThreads, size_t wideThreads);

// Whether the one kernel gives each of `tokens` rows of rowPacks 16-byte packs a CTA of its
// own past maxCtas, on the kernel built for two CTAs an SM (instead of maxCtas CTAs taking
// rows in turn): at 2 ranks, rows a CTA's ctaThreads data threads hold one pack each, and
// only where every row's CTA is resident at once (tokens <= resident: that kernel's CTAs
// the device holds at the row's thread count).
bool normRowsOwnCtas(size_t tokens, size_t rowPacks, int nranks, size_t maxCtas, size_t ctaThreads, size_t resident);

// The one kernel's grid where each row is one CTA's (no cluster), for `tokens` rows: a CTA
// a row up to maxCtas, rows in turn beyond; rowCtas (FC_ARNORM_ROW_CTAS, or `tokens` where
// normRowsOwnCtas says so; 0: maxCtas) moves that limit, but never past `resident`, the
// CTAs of the launched kernel that the device holds at once (every CTA waits on its rows'
// packs from the peers' CTAs of the same index, so all must run together). Above maxCtas
// the launch takes the kernel built for two CTAs an SM (fewer registers), so that the rows
// past 128 get SMs of their own.
size_t normRowCtas(size_t tokens, size_t maxCtas, size_t rowCtas, size_t resident);

// Rows per CTA of the local residual + RMSNorm kernel (collectives/allreduce_norm.cu,
// launchResidualNorm) for `tokens` rows of rowPacks 16-byte packs, packsPerThread of a row
// per thread: 1, 2 or 4, at most 4 / packsPerThread (more than 2 a thread: 1). forced:
// FC_NORM_LOCAL_ROWS (0: by the rows' bytes; 1, 2 or 4: that many where the packs allow).
int residualNormRowsPerCta(size_t tokens, size_t rowPacks, size_t packsPerThread, int forced = 0);

// fcMatmulAllReduce's norm behind its decode kernel (launchResidualNorm's fp32 sums, at most
// 16 rows, a CTA a row): the packs of its row of rowPacks 16-byte packs that each thread
// holds in registers, in CTAs of up to maxThreads (>= 512) threads - 1 for rows of more
// than 512 packs and fewer than maxThreads, 2 for rows of maxThreads to 2 x maxThreads -
// else 0: the 512-thread kernel (one pack a thread up to 512 packs, its row loop beyond).
int residualNormRegPacks(size_t rowPacks, size_t maxThreads);

// ---- All-gather + GEMM (fcAllGatherMatmul) ----------------------------------------------
struct AllGatherMatmulQuery {
  FusedAlgo forced = FusedAlgo::Auto;  // FC_AGMM_ALGO
  int nranks = 1;
  int gpuSms = 0;     // the GPU's SMs (the pipeline's cuBLASLt GEMMs take them all)
  int engineSms = 0;  // the engine's persistent grid (FC_ENGINE_SMS, else gpuSms)
  size_t M = 0, N = 0, K = 0;
  bool engineTakes = false;   // the engine supports the shape and its shard fits a slot
  bool pipelineFits = false;  // a shard fits a workspace slot (or A is symmetric)
  bool pipelineInPasses = false;  // it does not, and the pipeline can run in passes of rows
  // The engine would push the shards (a plain A, or a symmetric one without Agathered):
  // the form its model (allGatherEngineSeconds) was fitted to; the pulled form (a
  // symmetric A with Agathered) keeps the unfused path below 1024-row shards.
  bool enginePushes = true;
};
// The path (never Auto): auto is a function of the shape, world size, SM counts and the
// caller's form (enginePushes), the same on every rank that calls alike. A forced engine
// that cannot run falls back to the pipeline, the auto one to unfused, or, for a shard
// beyond a slot (the engine stages whole shards), to the pipeline in passes where that
// fills its waves; a pipeline that fits neither way to unfused.
FusedAlgo chooseAllGatherMatmul(const AllGatherMatmulQuery& q);
// The unfused path's all-gather of shards of `shardBytes`: Lamport (into the scratch,
// not a caller's Agathered: it may rewrite NaN bits), CopyEngine or Sm.
MoveAlgo allGatherMatmulGather(int nranks, size_t shardBytes, bool intoCallerBuffer);
// The pipeline's cost model (its GEMM grouping, fused/allgather_matmul.cc): seconds for
// a copy-engine pull of `bytes`, and for a GEMM of rows x N x K.
double pipelinePullSeconds(size_t bytes);
double pipelineGemmSeconds(size_t rows, size_t N, size_t K);

// ---- GEMM + reduce-scatter (fcMatmulReduceScatter) --------------------------------------
struct MatmulReduceScatterQuery {
  FusedAlgo forced = FusedAlgo::Auto;  // FC_MMRS_ALGO
  int nranks = 1;
  int gpuSms = 0;           // the GPU's SMs
  size_t M = 0, N = 0, K = 0;
  size_t chunkRows = 0;     // the pipeline's chunk of a block (0: it does not fit)
  size_t partialBytes = 0;  // every block's partial (M x N in the partials' type)
  size_t workspaceBytes = 0;
  bool engineFits = false;  // the engine takes the shape (and the partials' type)
  bool epilogueAdd = false;  // the engine would add the peer's partial in its epilogue
  bool lamportFits = false;  // fcReduceScatter would take its Lamport kernel for a block
  // fcMatmulAllReduce asks (its products gather in the engine's epilogue, which pays at
  // any K, where fcMatmulReduceScatter's engine alone stops at a K limit).
  bool allReduce = false;
};
MmrsPath chooseMatmulReduceScatter(const MatmulReduceScatterQuery& q);
// The staged path's reduce-scatter of `partialBytes` of partials: Sm or CopyEngine.
MoveAlgo matmulReduceScatterStagedMove(int nranks, size_t partialBytes);
// The engine counts (and pulls) a block of `blockBytes` in this many pieces: up to
// `most` (FC_MMRS_ENGINE_PIECES), none smaller than the table's minimum, at least one.
int64_t matmulReduceScatterEnginePieces(size_t blockBytes, int64_t most);
// fcMatmulReduceScatter's engine at 2 ranks, adding the peer's partial in its epilogue:
// its tiles in the interleaved order (gemm/engine/interleave.h) where K is short, in
// pieces of pieceRows (whole clusters of clusterRows: the scheduler interleaves nothing
// else) with the peer's first `lead` pieces ahead; {0, 0}: the plain order (the peer's
// block, then ours) and the pieces of matmulReduceScatterEnginePieces.
struct MmrsInterleave {
  int64_t pieceRows = 0;
  int lead = 0;
};
MmrsInterleave matmulReduceScatterInterleave(int64_t blockRows, size_t K, int64_t clusterRows);

// ---- GEMM + all-reduce (fcMatmulAllReduce and its residual + RMSNorm forms) -------------
struct MatmulAllReduceQuery {
  MatmulAllReduceAlgo forced = MatmulAllReduceAlgo::Auto;  // FC_MMAR_ALGO
  int nranks = 1;
  size_t M = 0, N = 0, K = 0;
  bool oneKernelFits = false;  // the decode kernel takes the shape (gemvAllReduceFits)
  int maxCtas = 128;           // the decode kernel's most CTAs (the communicator's)
  bool rowsSplit = false;      // the reduce-scatter + all-gather can run (M % nranks == 0,
                               // the sums in the input type: not the fp8 form)
  bool norm = false;           // a residual + RMSNorm form
  bool engineGathers = false;  // the reduce-scatter path's GEMM engine also all-gathers
                               // (2 ranks, its epilogue add; matmulReduceScatterGathers)
  bool decodeEngineFits = false;  // the decode engine takes the call (api_matmul_all_reduce.cc)
  int decodeGemmSms = 0;  // the all-reduce path's decode GEMM's SMs (Gemm::decodeSms; 0: cuBLASLt only)
};
// The path: a forced one where it can run (Fused: the one kernel, else the
// reduce-scatter + all-gather, else the all-reduce; Engine: the reduce-scatter +
// all-gather, else the all-reduce; Decode: the decode engine, else auto's choice), else
// a function of the shape and the world size.
MatmulAllReducePath chooseMatmulAllReduce(const MatmulAllReduceQuery& q);

// The one decode kernel's tensor-core form's tile width in columns (its kernel asserts it).
constexpr size_t kGemvMmaTileCols = 32;
// The one decode kernel's form: tensor-core MMAs (else CUDA-core FMAs) for M rows of an
// [M, N] output with K-long rows on at most maxCtas CTAs.
bool gemvAllReduceMma(size_t M, size_t N, size_t K, int maxCtas);
// Whether the one decode kernel's norm forms do the residual + RMSNorm inside it (each
// block's row sums of squares exchanged through the rank's memory) rather than in a
// second kernel behind it; forced: FC_GEMV_NORM (-1: auto).
bool gemvNormInside(int forced);
// Whether the MMA form's tiles of 32 columns of N are at most maxCtas (one per CTA).
bool gemvMmaOneTilePerCta(size_t N, int maxCtas);
// How the one decode kernel's warps stream the weight: the depth of their rings of loads
// in shared memory (0: loads into registers, one batch ahead), whether each tile starts
// its walk along K at its own place, whether the MMA form copies B's rows whole. Auto
// takes rings always, 2 deep where a deeper ring's start-up is not repaid (the FMA form
// below K 4096, the MMA form below 8 warpBatches), chosen with the weight cold (not in L2),
// as a model's decode step reads it; each warp also brings its first batch of B into L2
// before the kernel's PDL wait. Forced values (FC_GEMV_STAGES, FC_GEMV_ROTATE,
// FC_GEMV_ROW_COPIES, FC_GEMV_PREFETCH; -1: auto) win; the depth is at most fitStages
// (what the shared memory holds) and kGemvMaxRingStages, and a depth below 2 is none.
constexpr int kGemvMaxRingStages = 8;
struct GemvStreamQuery {
  bool mma = false;           // the tensor-core form (tiles of 32 columns; else 8)
  size_t K = 0;
  size_t tiles = 0, grid = 1;  // the call's tiles over the grid's CTAs
  size_t busyWarps = 8;        // the busiest CTA's warps that have tiles
  size_t warpBatches = 0;      // the batches of loads of B a warp takes for a tile
  size_t warpStageBytes = 0;   // one stage of one warp's ring
  size_t fitStages = 0;        // the most stages the kernel's shared memory holds
  int stages = -1, rotate = -1, rowCopies = -1, prefetch = -1;  // forced (-1: auto)
};
struct GemvStream {
  int stages = 0;
  bool rotate = false, rowCopies = false;
  int prefetch = 0;  // batches of each warp's first tile into L2 before the PDL wait
};
GemvStream chooseGemvStream(const GemvStreamQuery& q);

// ---- The decode GEMM (src/gemm/decode, fc::Gemm) --------------------------------------------
// Tokens per tile of the decode GEMM (16 or 32) for D [M, N] = A [M, K] x B^T on smCount
// SMs, or 0: cuBLASLt's GEMM there.
int decodeGemmTokens(size_t M, size_t N, size_t K, int smCount);
// The same for fcMatmulAllReduce's decode engine (FC_MMAR_ALGO=decode), whose GEMM is
// always the decode GEMM: up to 256 rows, at any K, on tiles of 16, 32, 64 or 128 tokens:
// to 48 rows the narrowest whose tiles fit one wave, above it the one that pads the
// fewest rows, then the fewest waves (at most 3), then the narrowest (where K < 1.5 N the
// kernel took 0.99-1.09x cuBLASLt's time with the weight cold at 1-32 rows, 0.86-1.39x
// at 64-256 rows; the engine's pushes are to buy more than that back: to be timed on 2 GPUs).
int decodeEngineTokens(size_t M, size_t N, int smCount);

// ---- The GEMM engine's tile shape (src/gemm/engine/engine.cc) ---------------------------
// 128 x 128 ping-pong tiles instead of 128 x 256 cooperative ones, for the all-gather
// engine's M x N x K GEMM (2-byte elements) on smCount SMs.
bool engineSmallTiles(size_t M, size_t N, size_t K, int smCount);
// The all-gather engine's tile width: 256, 224, 192 or 160 (128 x 256 ... 128 x 160
// cooperative), 128 or 96 (128 x 128 / 128 x 96 ping-pong): the one whose waves spread the
// product over the SMs in the fewest columns per SM, weighted by a column's cost on each
// tile (one wave of 128 x 96 tiles at 512 x 3072 instead of 96 tiles of 128 x 128 on 132
// SMs; one of 128 x 224 at 1024 x 3584). Between 128 and 256 it decides as engineSmallTiles.
int engineTileN(size_t M, size_t N, size_t K, int smCount);
// The same for fcAllGatherMatmul's engine on nranks ranks, its pulls in the model: the width
// whose tiles finish first when a peer's tiles wait for its shard to land (the CTAs work
// through our own rows meanwhile), from allGatherEngineSeconds. Where the pulls hide (many
// waves) the choice is engineTileN's; where they do not, the width that leaves local tiles
// for the SMs while the shard lands (1024 x 3072 x 4096 at 2 ranks: 128 x 96 in two waves,
// not one wave of 128 x 192). O(ranks^2) on the host (~0.1 us at 2 ranks).
int allGatherEngineTileN(size_t M, size_t N, size_t K, int nranks, int smCount);
// The model behind it (docs/design.md, "The all-gather engine's model"), in seconds: the
// engine on tileN-wide tiles, and the unfused path (the all-gather, then the GEMM on the
// width that finishes first), for an M x N x K product of 2-byte elements.
double allGatherEngineSeconds(size_t M, size_t N, size_t K, int nranks, int smCount, int tileN);
double allGatherUnfusedSeconds(size_t M, size_t N, size_t K, int nranks, int smCount);
// The engine's bands: where B [N, K] (2-byte elements) is well beyond L2, its persistent
// grid rasters along N in bands of this many clusters of clusterRows rows (the library's:
// 2 x 1 clusters of 128-row tiles; CUTLASS's swizzle: 1, 2, 4 or 8), M fastest inside a
// band, so that each B tile is read by the band's rows while it is in L2. None wider than
// a shard of shardRows rows, than half of L2 in A's rows, or than the grid of M x N tiles
// of tileN columns takes without padding (CUTLASS pads the grid to whole bands and runs
// the padding as empty tiles).
constexpr size_t kEngineClusterRows = 256;
int engineBands(size_t M, size_t N, size_t K, size_t shardRows, int tileN, size_t clusterRows = kEngineClusterRows);
// The same for the reduce-scatter engine (which also takes them where K is short, and
// for fcMatmulAllReduce, whose engine stores into the peer's memory from every tile
// (gathers), always).
bool scatterEngineSmallTiles(size_t M, size_t N, size_t K, int smCount, bool gathers = false);

}  // namespace fc::tuning
