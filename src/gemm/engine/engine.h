// The persistent GEMM engine of both fused ops (CUTLASS sm90, TMA + WGMMA,
// warp-specialized, one launch per op) with tile schedulers of our own that follow the
// communication: all-gather + GEMM waits, per tile row, for the shards of A that the
// copy engine is still pulling (readiness_scheduler.cuh); GEMM + reduce-scatter's tiles,
// in destination order, count on their owner's counters once stored
// (scatter_scheduler.cuh, tile_signal_epilogue.cuh, own_block_epilogue.cuh).
//
// Host-side interface: no CUTLASS here, so that the fused ops' schedules compile
// without it; the kernels live in one translation unit per instantiation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "device/device_comm.h"
#include "fusedcomm.h"

namespace fc::engine {

// The tile order and, for all-gather + GEMM, where the gathered A's shards stand (a
// kernel argument, by value). Tile rows are taken from the one holding row firstRow
// on, wrapping around: all-gather + GEMM starts on this rank's own shard (in place
// before the kernel starts), GEMM + reduce-scatter on the block of rank+1 (its own
// block last, the destination order of torch symm_mem's fused_matmul_reduce_scatter).
struct ShardReadiness {
  const uint32_t* flags = nullptr;  // flags[s] = c: the first c pieces of shard s are in
                                    // place (this rank's memory); NULL: nothing to wait for
  int64_t M = 0;                    // rows of A
  int64_t shardRows = 0;            // M / nranks
  int64_t pieceRows = 0;            // rows a shard's pull lands at a time (its last piece: the rest)
  int64_t firstRow = 0;             // the row whose tile row comes first
  DeviceComm dc{};                  // rank, nranks, deadline, error record
  int channel = 0;
  // > 0: the shards land in pieces of K columns instead (kPieceCols each, a multiple
  // of kEngineTileK; the last: the rest), flags[s] = c once the first c are in place,
  // and the mainloop waits for each piece before its k-blocks (own_rows_mainloop.cuh)
  // while the scheduler waits for nothing. Shards of whole tile rows only.
  int64_t kPieceCols = 0;
};

// The K extent of every engine configuration's tile (allgather_gemm.cuh): pieces of K
// columns are whole multiples of it.
constexpr int64_t kEngineTileK = 64;

// GEMM + reduce-scatter: once output tiles have landed, a release add (system scope)
// of their number to the counter of the rank owning their rows and of the piece of
// its block they lie in: owner r's counter of piece p is at counters + r * stride + p
// words (tile_signal_epilogue.cuh). NULL counters: no signals.
struct TileSignal {
  char* counters = nullptr;
  uint64_t stride = 0;
  int64_t blockRows = 0;  // rows each rank owns (M / nranks), a multiple of 128 (tile rows)
  int64_t pieceRows = 0;  // rows per counted piece of a block (whole tile rows; the last piece: the rest)
  int self = -1;          // the owner whose tiles nobody waits for (ours): not counted
  // Signal every tile as soon as it has landed instead of batching a run of them: set
  // by the engine when our own tiles' epilogue waits for a peer (EpilogueSource), which
  // a batch left pending could wait behind (tile_signal_epilogue.cuh).
  bool eachTile = false;
  // Every epilogue thread waits for the grid before the kernel (griddepcontrol.wait)
  // before its first store: set by the engine for a PDL launch (EngineGemm::pdl), whose
  // grid before is the entry barrier that says the peers have reached the call.
  bool afterPreviousGrid = false;
};

// GEMM + reduce-scatter at 2 ranks (EngineGemm::chain false): the tiles of our own
// block (computed last) add the peer's partial of the block, which the peer's GEMM
// computes first, read in place
// from the peer's workspace, and store the rounded sum straight into the op's output
// (own_block_epilogue.cuh): D = round(round(A x op(B)) + C) there, fp32 sum, i.e.
// each partial rounded once as cuBLAS + NCCL compute it. Before loading the C rows of
// a tile the epilogue waits (bounded, the library's deadline) until the peer's tiles
// of the piece those rows lie in have landed: counters[piece] counts them (the peer's
// TileSignal, in our memory). NULL C: no own-block epilogue.
// At 3-8 ranks (EngineGemm::chain): C is the next rank's fp32 running sums ([M, N], the
// product's rows, in its workspace), counters ours ([block * kMaxPieces + piece]: the next
// rank's tiles of that block and piece landed), D our block's output, producer the next
// rank; every tile from step 2 on waits and adds (own_block_epilogue.cuh).
struct EpilogueSource {
  const void* C = nullptr;  // [blockRows, N]: the peer's partial of our block, in its workspace
  void* D = nullptr;        // [blockRows, N]: our block's output
  int64_t firstRow = 0;     // our block's first row in the product (rank * blockRows)
  int64_t blockRows = 0;
  int64_t pieceRows = 0;               // rows per counted piece (whole tile rows)
  const uint32_t* counters = nullptr;  // [piece]: the peer's tiles landed; NULL: no waits
  int producer = -1;                   // the rank whose partial C is (the error record's peer)
  // GEMM + all-reduce: the block's sums also stored into the peer's memory here ([blockRows,
  // N]: fcMatmulAllReduce passes the peer's workspace at our block's rows), by TMA from the
  // epilogue's shared memory beside D: the all-gather half of the all-reduce rides in the
  // GEMM (own_block_epilogue.cuh). NULL: no such store (the kernels without it).
  void* gather = nullptr;
  // Where gather is the peer's C (fcMatmulAllReduce with C in symmetric memory): the entry
  // barrier's outcome word (barrierMetOf); the tiles store into the peer only after a 1,
  // since a mismatched peer's C may lie elsewhere (its workspace would be harmless). NULL:
  // always store.
  const uint32_t* gatherMet = nullptr;
};

// D [M, N] = A [M, K] x op(B), row-major, bf16 or fp16 in and out, fp32 accumulation;
// op(B) = B [K, N] (fcOpN) or B^T with B [N, K] (fcOpT). Tile rows in the order of
// `ready`, waiting for flags[s] before reading shard s of A (when flags are given);
// with `signal`, each tile signals its owner once stored.
struct EngineGemm {
  const void* A;
  const void* B;
  void* D;
  size_t M, N, K;
  fcOperation_t transB;
  fcDataType_t datatype;
  ShardReadiness ready;
  int smCount;  // SMs of the device: the persistent grid
  TileSignal signal{};
  int swizzle = 0;  // tile rows per band, in clusters (CUTLASS's max_swizzle_size: 1, 2,
                    // 4 or 8); 0: the engine's rule (allgather_gemm.cuh)
  // All-gather + GEMM: rows [ready.firstRow, ready.firstRow + ready.shardRows) of A
  // (this rank's shard) read in place from here instead of from A; their tile rows
  // need not be in A at all. Tile rows only partly inside are read from A, so callers
  // pass it only when firstRow and shardRows are multiples of 128. NULL: all from A.
  const void* ownA = nullptr;
  // All-gather + GEMM: the tiles of column 0 also store each A stage they load into this
  // [M, K] buffer (a caller's Agathered; own_rows_mainloop.cuh), the rows read in place
  // (ownA) too unless storeOwnA is false (they are there already). NULL: no stores.
  void* storeA = nullptr;
  bool storeOwnA = true;
  // GEMM + reduce-scatter's own block (launchMatmulScatterGemm only).
  EpilogueSource source{};
  // GEMM + reduce-scatter: the word its tiles are handed out by, in order, to the
  // clusters that ask (device memory, zero before the launch, zero again when the
  // kernel ends; one per stream of calls that may overlap; with pdl only behind a
  // kernel launched without it - the entry barrier - which starts after the previous
  // GEMM has ended and put the word back to zero): scatter_scheduler.cuh. Required there.
  uint32_t* tileTicket = nullptr;
  // The tile shape: 128 (128 x 128 ping-pong) or 256 (128 x 256 cooperative), and for
  // the all-gather engine also 224, 192, 160 (cooperative) or 96 (ping-pong); 0: the tuning rule
  // (all-gather: tuning::engineTileN, the GEMM alone's; fcAllGatherMatmul passes
  // tuning::allGatherEngineTileN's, which weighs the pulls; reduce-scatter:
  // tuning::scatterEngineSmallTiles without the gather). For GEMM + reduce-scatter the
  // fused op that schedules the engine decides (fused/matmul_reduce_scatter.cc), and both
  // ranks' counts of a piece's tiles follow it.
  int tileN = 0;
  // Launch with programmatic stream serialization: the kernel may start once the
  // kernel before it on the stream lets it (griddepcontrol.launch_dependents), and its
  // mainloop does not wait for that kernel's completion: only for a predecessor whose
  // results it does not read (the engines' entry barriers). The GEMM + reduce-scatter
  // kernels' epilogue waits for it (griddepcontrol.wait) before its first store
  // (TileSignal::afterPreviousGrid): fcMatmulAllReduce's stores go into the peer.
  bool pdl = false;
  // GEMM + reduce-scatter at 3-8 ranks: the chain of fp32 running sums
  // (own_block_epilogue.cuh): D is our workspace's [M, N] fp32 running sums, source the
  // next rank's (EpilogueSource), signal the previous rank's counters with the block as
  // the owner (TileSignal: counters = its [block][piece] words, stride kMaxPieces
  // words). 128 x 128 ping-pong tiles only (tileN 128).
  bool chain = false;
  // GEMM + reduce-scatter at 2 ranks with the epilogue add: the tiles handed out with the
  // pieces of the two blocks interleaved, `lead` pieces of the peer's block ahead of our
  // first (interleave.h; where blocks and pieces are whole clusters of tile rows); 0:
  // the peer's block, then ours.
  int lead = 0;
};

// Whether the engine takes this problem: bf16 / fp16, and every row of A, B and D
// 16-byte aligned (TMA), sizes within int range.
bool engineSupports(const EngineGemm& g);

// Enqueue the all-gather + GEMM kernel on `stream` (one launch; no signals), on tiles
// of 128 x g.tileN (0: tuning::engineTileN). fcNotSupported when CUTLASS refuses the
// problem.
fcResult_t launchAllGatherGemm(const EngineGemm& g, cudaStream_t stream);

// GEMM + reduce-scatter: 128 x 256 x 64 cooperative or 128 x 128 x 64 ping-pong tiles
// (engine.cc, scatterSmallTiles), in 2 x 1 clusters. It takes what engineSupports
// takes whose blocks (g.signal.blockRows) and pieces (g.signal.pieceRows) are whole
// tile rows, at most kMaxPieces pieces; each rank's counter of piece p then reaches
// scatterGemmPieceTiles(g, p) once that piece of its block is stored.
bool scatterGemmSupports(const EngineGemm& g);
size_t scatterGemmPieceTiles(const EngineGemm& g, int64_t piece);

// Enqueue the GEMM + reduce-scatter kernel (g.signal and g.tileTicket set, g.source
// optional; the scheduler waits for nothing: ready.flags NULL; tiles handed out in
// order to the clusters that ask: scatter_scheduler.cuh). With g.source.gather, the
// kernels whose epilogue also stores our block's sums into the peer's memory; with
// g.chain, the chain's kernels (128 x 128 tiles).
fcResult_t launchMatmulScatterGemm(const EngineGemm& g, cudaStream_t stream);

}  // namespace fc::engine
