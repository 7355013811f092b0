// The engine's mainloop with a second source of A: the stock CUTLASS sm90 TMA
// warp-specialized mainloop (CollectiveBuilder's), whose producer loads the tile rows
// of this rank's own shard from the caller's A in place, and every other tile row
// from the gathered buffer.
//
// Why: all-gather + GEMM's own rows would otherwise have to be copied into the
// gathered buffer before the GEMM may start (the copy and the barrier in front of it
// measured 19-29 us of fixed cost on 2 H200s, fc-bench agmmstages, 2026-11-24). With
// them read in place the GEMM starts at once, while the copy engine moves the peers'
// rows.
//
// How: a second TMA descriptor for A, over the same M x K coordinates as the first,
// whose base lies ownFirstRow rows before the caller's A: a tile row inside the own
// shard then loads exactly the caller's rows, at the same coordinates the gathered
// descriptor would use (so the stock load, its partitioning and its pipeline are
// reused unchanged: only the descriptor differs). TMA only reads the coordinates it is
// asked for and the descriptor only needs its base 16-byte aligned, so the rows before
// the caller's A are never touched. A is not multicast (clusters are 2 x 1: the CTAs
// of a cluster share B and read different rows of A), so each CTA picks its source for
// its own tile row. Only tile rows entirely inside the shard read in place; the caller
// (fused/allgather_matmul.cc) takes this mode only when the shard is whole tile rows.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>

#include <cstdint>
#include <utility>

namespace fc::engine {

template <class Base>
struct OwnRowsMainloop : Base {
  using ElementA = typename Base::ElementA;

  struct Arguments : Base::Arguments {
    const ElementA* ptr_A_own = nullptr;  // row ownFirstRow of A, in place; NULL: none
    int64_t own_first_row = 0;            // the first row of A it holds
    int64_t own_rows = 0;                 // how many
  };

  struct Params : Base::Params {
    // The own rows' descriptor with the same B (the stock load takes both from one
    // Params): Base::load runs on `own` for own tile rows, on the base for the rest.
    typename Base::Params own;
    int32_t own_tile_begin = 0, own_tile_end = 0;  // tile rows [begin, end) read in place
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args, void* workspace) {
    Params p;
    static_cast<typename Base::Params&>(p) = Base::to_underlying_arguments(problem_shape, args, workspace);
    p.own = p;
    if (args.ptr_A_own != nullptr && args.own_rows > 0) {
      constexpr int64_t kTileM = cute::size<0>(typename Base::TileShape{});
      typename Base::Arguments shifted = args;
      // The row stride of A (row-major: the first mode's stride) in bytes; the base is
      // computed as an integer: it lies outside the caller's allocation.
      const int64_t rowBytes = int64_t(cute::get<0>(args.dA)) * int64_t(sizeof(ElementA));
      shifted.ptr_A = reinterpret_cast<const ElementA*>(reinterpret_cast<uintptr_t>(args.ptr_A_own) -
                                                        uintptr_t(args.own_first_row * rowBytes));
      p.own = Base::to_underlying_arguments(problem_shape, shifted, workspace);
      p.own_tile_begin = int32_t((args.own_first_row + kTileM - 1) / kTileM);
      p.own_tile_end = int32_t((args.own_first_row + args.own_rows) / kTileM);
    }
    return p;
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& p) {
    Base::prefetch_tma_descriptors(p);
    Base::prefetch_tma_descriptors(p.own);  // own tile rows load B through `own` too
  }

  // The producer's loads of one tile: the stock ones, from the descriptor of the
  // tile row's source. Both Params live in the kernel's parameters (TMA reads its
  // descriptor from there).
  template <class Pipeline, class PipelineState, class LoadInputs, class BlockCoord, class... Rest>
  CUTLASS_DEVICE void load(Params const& p, Pipeline pipeline, PipelineState state, LoadInputs const& inputs,
                           BlockCoord const& blk_coord, Rest&&... rest) {
    const int32_t m = int32_t(cute::get<0>(blk_coord));
    const bool own = m >= p.own_tile_begin && m < p.own_tile_end;
    Base::load(own ? p.own : static_cast<typename Base::Params const&>(p), pipeline, state, inputs, blk_coord,
               std::forward<Rest>(rest)...);
  }
};

}  // namespace fc::engine
