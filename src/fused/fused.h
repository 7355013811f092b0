// The fused GEMM + communication ops (fcAllGatherMatmul, fcMatmulReduceScatter): their
// paths orchestrate the copy engine and the collectives' kernels (src/collectives), the
// barrier kernels, cuBLASLt GEMMs (src/gemm) and the persistent GEMM engine of both ops
// (src/gemm/engine) on the caller's stream and the channel's copy queue. Which path
// runs is tuning::chooseAllGatherMatmul / chooseMatmulReduceScatter's answer (src/tuning).
// Arguments are validated by src/api. docs/design.md, "Fused all-gather + GEMM" and
// "Fused matmul + reduce-scatter".
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/copy_queue.h"
#include "device/device_comm.h"
#include "fusedcomm.h"
#include "gemm/gemm.h"
#include "tuning/algos.h"

namespace fc {

struct NormCall;  // collectives/collectives.h

// Filled by name (src/api/api_fused.cc).
struct AllGatherMatmulArgs {
  const void* A = nullptr;          // [M/W, K] shard
  const void* B = nullptr;          // [K, N] (fcOpN) or [N, K] (fcOpT)
  void* C = nullptr;                // [M, N]
  void* Agathered = nullptr;        // [M, K] or NULL
  size_t M = 0, N = 0, K = 0;
  fcOperation_t transB = fcOpN;
  fcDataType_t datatype = fcBfloat16;
  void* scratch = nullptr;  // allGatherMatmulScratch bytes of the channel's scratch
  int smCount = 0;          // SMs the engine's persistent grid takes (FC_ENGINE_SMS, else gpuSms)
  int gpuSms = 0;           // SMs of the device (the pipeline's cuBLASLt GEMMs take them all)
  // The engine's GEMM starts only once every pull has landed (ranks sharing a GPU,
  // FC_SHARE_GPU: measured there, the pulls stall while the ranks' persistent GEMMs
  // spin on the time-sliced GPU; its waits then pass at once).
  bool engineAfterPulls = false;
  // Programmatic dependent launch (FC_PDL) for the unfused path's Lamport all-gather and
  // the engine's GEMM behind its entry barrier.
  bool pdl = true;
  int enginePieces = 1;  // the engine pulls each shard in this many pieces, each flagged (FC_AGMM_ENGINE_PIECES)
  // FC_AGMM_ENGINE_KPIECES (> 1): where the engine pushes the shards (viaEnginePush),
  // each lands in this many pieces of K columns, each flagged, and a peer's tile waits
  // per piece in its mainloop instead of for its rows before it (engine.h,
  // ShardReadiness::kPieceCols). 1: pieces of rows as above.
  int engineKPieces = 1;
  // FC_AGMM_ENGINE_PUSH=sm: where the engine pushes the shards, a kernel on a few SMs in
  // front of the GEMM stores them (fused/shard_push.cu) instead of the copy queue.
  bool enginePushBySm = false;
  // FC_AGMM_ENGINE_TILES: the engine's tile width (engine::EngineGemm::tileN; 0: the
  // rule, tuning::allGatherEngineTileN). Each rank's GEMM is its own: ranks may differ.
  int engineTileN = 0;
  // FC_AGMM_ENGINE_STAGES, timing only (wrong results when false): the engine's GEMM
  // waits for the flags; the remote shards are pulled.
  bool engineWaits = true, enginePulls = true;
  // FC_AGMM_PASSES (the communicator's default: push-own-first): how the pipeline in
  // passes moves a pass's rows (tuning/algos.h; allgather_matmul.cc,
  // pipelineInPassesPushed).
  AgmmPasses passes = AgmmPasses::Pull;
  // FC_AGMM_AGATHERED=beside (the communicator's default): the engine path fills a
  // caller's Agathered on the copy queue beside its GEMM instead of in front of it
  // (plain A: the peers push into our workspace as without Agathered; symmetric A: our
  // rows read in place; allgather_matmul.cc).
  bool agatheredBeside = false;
  // FC_AGMM_AGATHERED=stages: in the pushed form (plain A) the GEMM fills Agathered
  // itself, its tiles of column 0 storing each A stage they load (EngineGemm::storeA),
  // where Agathered takes TMA stores (16-byte aligned); the copy queue copies nothing.
  bool agatheredStages = false;
  // FC_AGMM_SYMMETRIC=push (the communicator's default): the engine path moves a
  // symmetric A's shard as a plain A's, pushed by us into the peers' workspaces
  // (viaEnginePush: no barrier at the end, as nobody reads our A), not pulled by them
  // from A (viaEngine); without Agathered only (pulled rows land in a caller's Agathered
  // at once, a copy fewer than pushed ones).
  bool symmetricPush = false;
};


// Bytes of scratch launchAllGatherMatmul needs: the gathered A when no Agathered is given.
size_t allGatherMatmulScratch(const DeviceComm& dc, const AllGatherMatmulArgs& a);

// C = allgather(A) x op(B); see fcAllGatherMatmul. symmetricA: where every rank's A
// lies in symmetric memory (zero-copy), or NULL.
fcResult_t launchAllGatherMatmul(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm,
                                 const AllGatherMatmulArgs& a, const SymSource* symmetricA,
                                 FusedAlgo choice, cudaStream_t stream);

// Filled by name (src/api/api_fused.cc).
struct MatmulReduceScatterArgs {
  const void* A = nullptr;  // [M, K]
  const void* B = nullptr;  // [K, N] (fcOpN) or [N, K] (fcOpT)
  void* C = nullptr;        // [M/W, N]
  size_t M = 0, N = 0, K = 0;
  fcOperation_t transB = fcOpN;
  fcDataType_t datatype = fcBfloat16;
  void* scratch = nullptr;  // matmulReduceScatterScratch bytes of the channel's scratch
  bool fp32Partials = false;  // partial products in fp32 (else in datatype)
  int smCount = 0;            // SMs the engine's persistent grid takes (FC_ENGINE_SMS, else gpuSms)
  int gpuSms = 0;             // SMs of the device (the pipeline's cuBLASLt GEMMs take them all)
  // FC_MMRS_ENGINE_STAGES, timing only (wrong results when false): the engine path's
  // copy queue waits for each peer's tiles of our block (gates), then pulls the block.
  bool engineGates = true, enginePulls = true;
  // The engine's own tiles add the peer's partial in the GEMM's epilogue, waiting there
  // for it; at 3-8 ranks every tile from the second step adds the next rank's running
  // sum (the chain) (FC_MMRS_ENGINE_STAGES=epilogue-add; not on ranks time-slicing a
  // GPU: FC_SHARE_GPU without FC_ENGINE_SMS).
  bool engineEpilogueAdd = false;
  // FC_MMRS_ENGINE_PIECES: that many pieces (1 to kMaxPieces, where the block has as
  // many tile rows); 0: the tuning table's rule (tuning::matmulReduceScatterEnginePieces).
  int enginePieces = 0;
  // FC_MMRS_ENGINE_LEAD: at 2 ranks with the epilogue add, the two blocks' pieces
  // interleaved, this many of the peer's ahead (EngineGemm::lead); 0: blocks whole; -1
  // (unset): the tuning rule (tuning::matmulReduceScatterInterleave).
  int engineLead = -1;
  // FC_MMRS_ENGINE_STAGES, probe build: epilogue-local (timing only, wrong results): our
  // tiles add a block of our own workspace without waiting; epilogue-push: our partial
  // of the peer's block pushed into its workspace, as fcMatmulAllReduce's engine does
  // (enginePushes), without the gather.
  bool engineLocalSource = false, enginePushPartials = false;
  // Whether fcReduceScatter would take its Lamport kernel for one block of partials
  // in the input type (tuning::chooseReduceScatter, FC_REDUCE_SCATTER_ALGO included);
  // small products then take the GEMM + that kernel. pdl: its launch (FC_PDL).
  bool lamportReduceScatter = false, pdl = true;
  // fcMatmulAllReduce: where the engine adds in its epilogue (2 ranks), it pushes our
  // partial of the peer's block into the peer's workspace and our block's sums there
  // too, at our block's rows (EpilogueSource::gather), behind an entry barrier;
  // matmulReduceScatterGathers says where.
  bool gatherToPeer = false;
  // ... and where C lies in symmetric memory (fcMatmulAllReduce's plain form: the peer's
  // mapping of its whole [M, N] C, at the offset ours has), our block's sums go straight
  // into the peer's C at our block's rows instead of its workspace: no copy after the op.
  // The entry barrier then records its outcome and the tiles store into the peer only
  // where it met the peers cleanly (EpilogueSource::gatherMet). NULL: the workspace.
  char* gatherC = nullptr;
  // FC_MMAR_ENGINE_STAGES, timing only (wrong results when changed): the gathering
  // engine's stores into the peer's workspace made into ours (peerStores false), our
  // block's sums not pushed (gatherSums false), our tiles not waiting (ownWaits false),
  // neither the barriers nor the counters' reset around the GEMM (barriers false).
  bool enginePeerStores = true, engineGatherSums = true, engineOwnWaits = true, engineBarriers = true;
  // FC_MMAR_ENGINE_TILES (fcMatmulAllReduce) / FC_MMRS_ENGINE_TILES (fcMatmulReduceScatter
  // with the epilogue add, probe build): the engine's tile shape (128 or 256 columns; 0:
  // the rule, tuning::scatterEngineSmallTiles).
  int engineTileN = 0;
  // The signature the op's barriers compare (0: fcMatmulReduceScatter's, of the shape).
  // fcMatmulAllReduce passes its own, which says whether this rank gathers: a choice
  // that rests on this rank's C alignment, which ranks must share.
  uint32_t sig = 0;
};

// Bytes of scratch launchMatmulReduceScatter needs with `choice` (its partials).
size_t matmulReduceScatterScratch(const DeviceComm& dc, const MatmulReduceScatterArgs& a, FusedAlgo choice);

// Whether launchMatmulReduceScatter with `choice` also stores our block's sums into the
// peer's workspace (a.gatherToPeer, and the engine adding in its epilogue). Then, once
// the call's final barrier has passed on our stream, our workspace (slot 0) holds the
// peer's block's sums at its block's rows: rows [peer * M/2, (peer+1) * M/2) (or, with
// a.gatherC, our C does, the peer having been given it too).
// anyAlignment: as if A, B and C were 16-byte aligned (the engine reads and stores them
// by TMA): the shape's answer, for choices that must not rest on one rank's buffers.
bool matmulReduceScatterGathers(const DeviceComm& dc, const MatmulReduceScatterArgs& a, FusedAlgo choice,
                                bool anyAlignment = false);
// The tile shape (128 or 256 columns) of the gathering engine (where it gathers): the
// rule's, or FC_MMAR_ENGINE_TILES's. In the op's signature, since ranks with different
// shapes would count a piece's tiles differently.
int matmulReduceScatterGatherTileN(const DeviceComm& dc, const MatmulReduceScatterArgs& a);

// C = rows [rank*M/W, (rank+1)*M/W) of the sum over ranks of A x op(B); see
// fcMatmulReduceScatter.
fcResult_t launchMatmulReduceScatter(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm,
                                     const MatmulReduceScatterArgs& a, FusedAlgo choice,
                                     cudaStream_t stream);

// fcMatmulAllReduce's decode path (gemv_all_reduce.cu): out = the sum over ranks of
// A [M, K] x B^T (B [N, K], an nn.Linear weight), GEMV and Lamport all-reduce in one
// kernel; out in datatype, or (fp32Out) the unrounded fp32 sums, or (norm) the norm
// forms' outputs, the residual + RMSNorm in the same kernel. gemvAllReduceFits says
// where it runs: bf16/fp16, fcOpT, 1 <= M <= kGemvAllReduceMaxRows, N and K multiples
// of 8, 16-byte aligned buffers, M x N within a Lamport push slot. form: FMAs or MMAs
// (Auto: tuning::gemvAllReduceMma; Fma where M allows it).
constexpr size_t kGemvAllReduceMaxRows = 16;
constexpr size_t kGemvFmaMaxRowsInstantiated = 4;  // the FMA form's instantiations
struct GemvAllReduceArgs {
  const void* A;
  const void* B;
  void* out;
  size_t M, N, K;
  fcOperation_t transB;
  fcDataType_t datatype;
  bool fp32Out;
  GemvForm form = GemvForm::Auto;
  // How the kernel streams B, forced (-1: tuning::chooseGemvStream's choice): its rings'
  // depth (FC_GEMV_STAGES; 0: loads into registers), each tile's walk along K from its own
  // start (FC_GEMV_ROTATE), the MMA form's copies of B's rows whole (FC_GEMV_ROW_COPIES);
  // the warps that split K for a tile (FC_GEMV_WARPS_PER_TILE: 1, 2, 4 or 8); the batches
  // of B a warp brings into L2 before the kernel's PDL wait (FC_GEMV_PREFETCH; 0: none).
  int stages = -1, rotate = -1, rowCopies = -1, warpsPerTile = -1, prefetch = -1;
  // The norm forms with the residual + RMSNorm inside the kernel (FC_GEMV_NORM=inside;
  // out and fp32Out unused): residualOut, out or outFp8 as the call's; NULL otherwise.
  const NormCall* norm = nullptr;
};
// Lets the kernels take the shared memory their rings need (at communicator init).
fcResult_t prepareGemvAllReduce();
bool gemvAllReduceFits(const DeviceComm& dc, const GemvAllReduceArgs& g);
// sig: the op signature the call headers compare; pdl: programmatic dependent launch.
fcResult_t launchGemvAllReduce(const DeviceComm& dc, int channel, const GemvAllReduceArgs& g, uint32_t sig, bool pdl,
                               cudaStream_t stream);

// Enqueue a one-thread kernel that waits (bounded: the communicator's deadline, abort,
// a peer's give-up) until *counter >= value, a word `producer` writes (tile_gate.cu);
// op and kind name the wait in the error record.
fcResult_t launchGate(const DeviceComm& dc, int channel, Op op, WaitKind kind, const uint32_t* counter,
                      uint32_t value, int producer, cudaStream_t stream);

// GEMM + reduce-scatter's gate, on the copy queue's stream: `producer` has stored every
// tile of our block (its counter reached `tiles`).
inline fcResult_t launchTileGate(const DeviceComm& dc, int channel, const uint32_t* counter, uint32_t tiles,
                                 int producer, cudaStream_t stream) {
  return launchGate(dc, channel, Op::MatmulReduceScatter, WaitKind::Tiles, counter, tiles, producer, stream);
}

// out[i] = round(own[i] + sum_j received[j * blockElems + i]), fp32 sums, i < n; the
// partials (own, received) in fp32 or in datatype.
fcResult_t launchReducePartials(const void* own, const void* received, size_t blockElems, int nreceived,
                                fcDataType_t partials, void* out, size_t n, fcDataType_t datatype,
                                cudaStream_t stream);

}  // namespace fc
