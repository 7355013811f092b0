// The GEMM + reduce-scatter engine's epilogue at 2 ranks: the tiles of our own block
// add the peer's partial of it and store the rounded sum straight into the op's
// output; every other tile stores its partial into our workspace, as before.
//
// Why: the engine computes our own block last (the destination order of torch's
// fused_matmul_reduce_scatter), and the peer computes it first, so its partial has long
// landed in the peer's workspace when our own tiles reach their epilogue. Adding it there leaves nothing after the GEMM: no
// separate pass that reads both partials and writes the sum (at 2048 x 4096 that pass
// and the barrier behind it were most of the engine's 56 us over its GEMM on 2 H200s).
// It is read in place, through the peer mapping, by the epilogue's TMA loads, which
// the epilogue's producer warp issues ahead of the tile's store (under its mainloop):
// no copy-engine pull, and so no gate kernel, which would need an SM of its own beside
// the GEMMs. The only thing an own tile waits for is then the peer GEMM's tiles, which
// the dynamic tile scheduler guarantees are taken by clusters that run
// (scatter_scheduler.cuh): found with both ranks' GEMMs on one GPU, grids too large to
// be resident together (tools/probes/engine-pair): with the pull behind a gate, the
// gate found no SM and both ranks waited until the deadline.
//
// How: two stock CUTLASS sm90 TMA epilogues over the same shared memory and pipelines,
// which differ only in their parameters (as OwnRowsMainloop's two A descriptors):
//  - the base one, for every other tile: D = the workspace, the source C scaled by 0
//    (never loaded);
//  - `own`, for our block's tile rows: D = the op's output and C = the peer's partial,
//    both bases shifted back by firstRow rows so that the same tile coordinates land on
//    the block's rows (TMA touches only the rows it is asked for), C scaled by 1.
// The fusion (ScatterFusion below) rounds each partial once before the fp32 sum, as
// cuBLAS + NCCL compute it: D = round(beta * C + round(A x op(B))).
// Only our block's tiles go through the C load pipeline; every other tile skips it,
// in the epilogue's load warp and in its consumers alike (the base epilogue's beta 0
// says no load is needed; the load warp returns such a tile's state untouched). This
// spares the other tiles the pipeline's handshakes; measured on one H100 it changed
// the GEMM's time by no more than noise (perf-log.md, 2026-11-25), so the scatter
// kernel's 4-6 us over the all-gather kernel lie elsewhere. Skipping is sound in the
// ping-pong kernel, which advances each warp group's pipeline states by a whole tile's
// stages for the other group's tile, because a tile's stages are an even multiple of
// StagesC (static_assert below): advancing by them leaves a state's stage index and
// phase where they were, so a tile that took none and a tile that took all leave the
// same state behind (the order barrier between the two groups' epilogues keeps the
// waits on one barrier from meeting two rounds of phases). Shared memory for C is the
// epilogue's own (ReuseSmemC off): with it on, each epilogue would count the other's
// stores as its own.
//
// The wait: the epilogue's producer warp, before loading the C rows of an own tile,
// waits until the peer's tile counter of the piece those rows lie in counts all of the
// piece's tiles (bounded: deadline, abort, a peer's give-up; on giving up it records
// the error and loads anyway, so the kernel finishes and the op reports it). The
// peer released the count at system scope after its TMA stores had landed
// (tile_signal_epilogue.cuh); we acquire it at system scope, then
// fence.proxy.async.global: the rows are read next by TMA (the async proxy). Only that
// warp waits: the consumers go on with the tile's mainloop and meet the data at the
// pipeline's barrier.
//
// At 3-8 ranks (kChain, the chain of running sums; docs/design.md, "At 3-8 ranks"): rank
// r computes block r+t at step t (t = 1..W, its own block last), and rank r+1 computed
// the same block one step earlier. So every tile from step 2 on adds one source, rank
// r+1's running sum of the same tile, and stores its own for rank r-1's next step: the
// 2-rank epilogue add at every step, each tile waiting for one peer's previous step. The
// running sums are fp32 (C and D of this epilogue), each partial rounded once to the
// input type before it is added (ChainFusionOf), so the sum keeps the 2-rank precision
// contract: fp32 over the rounded partials, rounded once at the end. Three parameter
// sets again: the base one (step 1: beta 0, D = our workspace), `mid` (steps 2..W-1:
// C = rank r+1's workspace, beta 1, D = ours) and `own` (step W: the same C, and the
// rounded sum stored by the fusion's auxiliary store into the op's output; D, fp32,
// into our workspace's rows of our block, which nobody reads). The workspace holds the
// product's M x N running sums at their own rows, so no base is shifted but the
// output's. Rank r+1 counts its tiles of block b on our counters [b][piece]
// (TileSignal with the block as its "owner": tile_signal_epilogue.cuh).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>

#include <cstdint>
#include <tuple>
#include <utility>

#include "device/device_comm.h"
#include "device/sync.cuh"
#include "gemm/engine/engine.h"

namespace fc::engine {

// D = round(beta * C + round(acc)), fp32 sum (ElementCompute float); beta a scalar.
// The C pipeline is taken where beta != 0 (CUTLASS's homogeneous_multiply_add visitor
// asks for C only then): by our block's tiles. Sum: the type of C and of the sum as
// stored, the input type (the 2-rank epilogue add: rounded once more) or float (the
// chain's running sums: not rounded); the partial is rounded once to Element either way.
template <class Element, class Sum = Element>
using ScatterFusion = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<cutlass::homogeneous_multiply_add, Sum, float,
                                           cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90ScalarBroadcast<float, cute::Stride<cute::_0, cute::_0, int64_t>>,
    cutlass::epilogue::fusion::Sm90SrcFetch<Sum>,
    cutlass::epilogue::fusion::Sm90EVT<
        cutlass::epilogue::fusion::Sm90Compute<cutlass::epilogue::thread::Identity, Element, float,
                                               cutlass::FloatRoundStyle::round_to_nearest>,
        cutlass::epilogue::fusion::Sm90AccFetch>>;

// The fusion's arguments for beta (0: the partial alone; 1: plus C).
template <class Element, class Sum = Element>
typename ScatterFusion<Element, Sum>::Arguments scatterFusionArguments(float beta) {
  return {{{beta}, {nullptr}, {}}, {}, {{}, {}}, {}};
}

// GEMM + all-reduce's fusion: ScatterFusion's D, also stored by TMA into a second
// tensor (CUTLASS's auxiliary store), the peer's copy of our block's sums
// (EpilogueSource::gather). Its pointer NULL (every tile but our block's): no store,
// a run-time test in the store callbacks. The store takes its own shared memory (as
// many stages as D's), which the mainloop's stage count makes room for; the kernels
// without it (fcMatmulReduceScatter's) keep theirs. The same bits as D: the node
// converts D's rounded value to its own type, the same type.
// With Sum = float, the chain's fusion (kChain, 3-8 ranks): D = beta * C + round(acc),
// the fp32 running sum (C and D fp32, not rounded), and the same value rounded once to
// the input type by the auxiliary store: the op's output (our block's tiles only).
template <class Element, class TileShape, class EpilogueSchedule, class Sum = Element>
struct GatherFusionOf {
  using Descriptor = cutlass::epilogue::collective::detail::EpilogueDescriptor<
      TileShape, cutlass::epilogue::collective::EpilogueTileAuto, Sum, Sum, EpilogueSchedule>;
  using Aux = cutlass::epilogue::collective::detail::AuxStoreDescriptor<Descriptor, cutlass::layout::RowMajor, Element>;
  using type = cutlass::epilogue::fusion::Sm90EVT<
      cutlass::epilogue::fusion::Sm90AuxStore<Aux::Stages, typename Aux::EpilogueTile, Element,
                                              cutlass::FloatRoundStyle::round_to_nearest, typename Aux::Stride,
                                              typename Aux::SmemLayoutAtom, typename Aux::CopyOpR2S>,
      ScatterFusion<Element, Sum>>;
  using Stride = typename Aux::Stride;
  // beta as scatterFusionArguments; gather: the second tensor's base (NULL: none).
  static typename type::Arguments arguments(float beta, Element* gather, Stride stride) {
    return {scatterFusionArguments<Element, Sum>(beta), {gather, stride}};
  }
};
template <class Element, class TileShape, class EpilogueSchedule>
using ChainFusionOf = GatherFusionOf<Element, TileShape, EpilogueSchedule, float>;

// A built sm90 TMA epilogue with its own shared memory for C (ReuseSmemC off) in
// kStagesC stages.
template <class Epilogue, int kStagesC>
struct WithOwnSmemC;
template <int SC, int SD, int FS, bool R, bool DT, class... Rest, int kStagesC>
struct WithOwnSmemC<
    cutlass::epilogue::collective::CollectiveEpilogue<cutlass::epilogue::Sm90TmaWarpSpecialized<SC, SD, FS, R, DT>,
                                                      Rest...>,
    kStagesC> {
  using type =
      cutlass::epilogue::collective::CollectiveEpilogue<cutlass::epilogue::Sm90TmaWarpSpecialized<kStagesC, SD, FS, false, DT>,
                                                        Rest...>;
};

// kChain: the 3-8-rank chain (above); false: the 2-rank epilogue add, whose kernels
// never use the `mid` instance (its parameters a copy of the base ones; ptxas: the same
// registers and stack as before it existed).
template <class Base, bool kChain = false>
class OwnBlockEpilogue : public Base {
  static_assert(Base::get_load_pipe_increment(typename Base::CtaTileMNK{}) %
                        (2 * int(Base::LoadPipelineState::Stages)) ==
                    0,
                "a tile's C stages must be an even multiple of StagesC for other tiles to skip the C pipeline");
  static constexpr int64_t kTileM = cute::size<0>(typename Base::CtaTileMNK{});

 public:
  struct Arguments : Base::Arguments {
    typename Base::Arguments own;       // our block's tiles: C, D (shifted bases), beta 1
    typename Base::Arguments ownLocal;  // the same without the gather (source.gatherMet)
    typename Base::Arguments mid;       // kChain: steps 2..W-1 (C the next rank's running sums, beta 1)
    EpilogueSource source;              // source.C NULL: no own-block epilogue
    DeviceComm dc{};               // the wait's deadline and error record
    int channel = 0;
  };

  struct Params : Base::Params {
    typename Base::Params own, ownLocal, mid;
    int32_t ownTileBegin = 0, ownTileEnd = 0;  // tile rows [begin, end): our block
    int32_t blockTiles = 1;                    // tile rows per block (kChain)
    EpilogueSource source;
    DeviceComm dc;
    int channel;
  };

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args,
                                                  void* workspace) {
    Params p;
    static_cast<typename Base::Params&>(p) = Base::to_underlying_arguments(problem_shape, args, workspace);
    p.own = p;
    p.mid = p;
    p.source = args.source;
    p.dc = args.dc;
    p.channel = args.channel;
    if (args.source.C != nullptr) {
      p.own = Base::to_underlying_arguments(problem_shape, args.own, workspace);
      p.ownLocal = args.source.gatherMet != nullptr ? Base::to_underlying_arguments(problem_shape, args.ownLocal, workspace)
                                                    : p.own;
      if constexpr (kChain) p.mid = Base::to_underlying_arguments(problem_shape, args.mid, workspace);
      p.ownTileBegin = int32_t(args.source.firstRow / kTileM);
      p.ownTileEnd = int32_t((args.source.firstRow + args.source.blockRows) / kTileM);
      p.blockTiles = int32_t(args.source.blockRows / kTileM);
    }
    return p;
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& p) {
    Base::prefetch_tma_descriptors(p);
    if (p.ownTileEnd > p.ownTileBegin) Base::prefetch_tma_descriptors(p.own);
    if constexpr (kChain)
      if (p.ownTileEnd > p.ownTileBegin) Base::prefetch_tma_descriptors(p.mid);
  }

  CUTLASS_HOST_DEVICE OwnBlockEpilogue(Params const& params, typename Base::TensorStorage& shared)
      : Base(params, shared),
        own_(params.own, shared),
        ownLocal_(params.ownLocal, shared),
        mid_(params.mid, shared),
        p_(params) {}

  // Whether the kernel runs the epilogue's load warp at all: only where some tiles are
  // our block's (the base epilogue, beta 0, would say never).
  CUTLASS_DEVICE bool is_producer_load_needed() const { return p_.ownTileEnd > p_.ownTileBegin; }

  // The load warp's C loads of one tile (all 32 lanes call it): none, and the
  // pipeline state untouched, for every tile without a source (see above). Arguments as
  // CUTLASS's kernels pass them: pipeline, state, problem shape, tile shape, tile
  // coordinate, ...
  template <class Pipeline, class State, class Problem, class TileShape, class TileCoord, class... Rest>
  CUTLASS_DEVICE State load(Pipeline pipeline, State state, Problem problem, TileShape tileShape, TileCoord coord,
                            Rest&&... rest) {
    const int32_t m = int32_t(cute::get<0>(coord));
    if (isOwn(m)) {
      waitForPiece(m, int64_t(cute::get<1>(problem)));
      return own_.load(pipeline, state, problem, tileShape, coord, std::forward<Rest>(rest)...);
    }
    if constexpr (kChain) {
      if (isMid(m)) {
        waitForPiece(m, int64_t(cute::get<1>(problem)));
        return mid_.load(pipeline, state, problem, tileShape, coord, std::forward<Rest>(rest)...);
      }
    }
    return state;
  }

  // The consumers' epilogue of one tile. Arguments: ..., tile coordinate (6), ...
  // An own tile skips its store into the peer where the entry barrier did not meet the
  // peers cleanly (source.gatherMet, read after the barrier's grid has ended:
  // TileSignalEpilogue waits for it before the first store; no kernel writes the word
  // while this one runs, so every thread reads the same value).
  template <class... Args>
  CUTLASS_DEVICE auto store(Args&&... args) {
    const int32_t m = int32_t(cute::get<0>(std::get<6>(std::forward_as_tuple(args...))));
    if (isOwn(m)) {
      if (p_.source.gatherMet != nullptr && fc::dev::loadVolatile(p_.source.gatherMet) != 1u)
        return ownLocal_.store(std::forward<Args>(args)...);
      return own_.store(std::forward<Args>(args)...);
    }
    if constexpr (kChain)
      if (isMid(m)) return mid_.store(std::forward<Args>(args)...);
    return Base::store(std::forward<Args>(args)...);
  }

 private:
  CUTLASS_DEVICE bool isOwn(int32_t tileRow) const { return tileRow >= p_.ownTileBegin && tileRow < p_.ownTileEnd; }

  // The block of tile row tileRow (nranks and beyond: rows past M).
  CUTLASS_DEVICE int32_t blockOf(int32_t tileRow) const { return tileRow / p_.blockTiles; }

  // kChain: a tile of steps 2..W-1, i.e. of a block other than ours and rank+1's (step
  // 1, which adds nothing), within M. The source's tiles: the next rank computed them
  // one step earlier.
  CUTLASS_DEVICE bool isMid(int32_t tileRow) const {
    const int32_t b = blockOf(tileRow), W = p_.dc.nranks;
    return b < W && b != p_.dc.rank && b != (p_.dc.rank + 1) % W;
  }

  // The piece holding tile row tileRow, counted as the producer's signals count it: its
  // tile rows times the tiles of a row (our tiles: both ranks run the same shape, so
  // the same configuration; columns past N count nothing). The host's gates count the
  // same from the configuration it dispatches (engine.cc, scatterGemmPieceTiles).
  // At 2 ranks the counters are the peer's for our block; in the chain our counters
  // [block][piece] (kMaxPieces per block).
  CUTLASS_DEVICE void waitForPiece(int32_t tileRow, int64_t N) const {
    const EpilogueSource& s = p_.source;
    if (s.counters == nullptr) return;
    if (cute::elect_one_sync()) {
      constexpr int64_t kTileN = cute::size<1>(typename Base::CtaTileMNK{});
      const int64_t block = kChain ? blockOf(tileRow) : 0;
      const int64_t first = kChain ? block * s.blockRows : s.firstRow;
      const int64_t piece = (int64_t(tileRow) * kTileM - first) / s.pieceRows;  // within the block
      const int64_t rows = s.blockRows - piece * s.pieceRows < s.pieceRows ? s.blockRows - piece * s.pieceRows
                                                                           : s.pieceRows;
      const uint32_t tiles = uint32_t(rows / kTileM * ((N + kTileN - 1) / kTileN));
      fc::dev::waitAtLeast(p_.dc, fc::Op::MatmulReduceScatter, s.counters + block * kMaxPieces + piece, tiles,
                           s.producer, p_.channel, fc::WaitKind::Tiles);
      asm volatile("fence.proxy.async.global;" ::: "memory");
    }
    __syncwarp();
  }

  Base own_, ownLocal_, mid_;
  Params const& p_;
};

}  // namespace fc::engine
