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
//
// Shards landing in pieces of K columns (ShardReadiness::kPieceCols, FC_AGMM_ENGINE_KPIECES):
// a peer's tile row is loaded piece by piece, the stock load called once per piece's
// k-blocks (the pipeline state and the k-block iterator advanced between, as the
// kernel advances them between tiles), after the producer warp has waited for that
// piece's flag. Why: where every tile fits in one wave (a few hundred rows), a peer's
// tile needs its rows at its first k-block, so pieces of rows cannot start it before
// the whole shard has landed; pieces of K columns let it start after the first piece
// and consume the rest at the mainloop's pace (design.md, "Small M").
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>

#include <cstdint>
#include <utility>

#include "device/sync.cuh"
#include "gemm/engine/engine.h"

namespace fc::engine {

template <class Base>
struct OwnRowsMainloop : Base {
  using ElementA = typename Base::ElementA;

  struct Arguments : Base::Arguments {
    const ElementA* ptr_A_own = nullptr;  // row ownFirstRow of A, in place; NULL: none
    int64_t own_first_row = 0;            // the first row of A it holds
    int64_t own_rows = 0;                 // how many
    ShardReadiness ready{};               // kPieceCols > 0: the waits per piece of K
  };

  struct Params : Base::Params {
    // The own rows' descriptor with the same B (the stock load takes both from one
    // Params): Base::load runs on `own` for own tile rows, on the base for the rest.
    typename Base::Params own;
    int32_t own_tile_begin = 0, own_tile_end = 0;  // tile rows [begin, end) read in place
    ShardReadiness ready{};
    int32_t k_blocks_per_piece = 0;  // 0: no waits here (the scheduler's, by rows)
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
    p.ready = args.ready;
    if (args.ready.flags != nullptr && args.ready.kPieceCols > 0)
      p.k_blocks_per_piece = int32_t(args.ready.kPieceCols / cute::size<2>(typename Base::TileShape{}));
    return p;
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& p) {
    Base::prefetch_tma_descriptors(p);
    Base::prefetch_tma_descriptors(p.own);  // own tile rows load B through `own` too
  }

  // The producer's loads of one tile: the stock ones, from the descriptor of the
  // tile row's source. Both Params live in the kernel's parameters (TMA reads its
  // descriptor from there). The producer warp calls this, every lane.
  template <class Pipeline, class PipelineState, class LoadInputs, class BlockCoord, class KTileIterator,
            class TensorStorage>
  CUTLASS_DEVICE void load(Params const& p, Pipeline pipeline, PipelineState state, LoadInputs const& inputs,
                           BlockCoord const& blk_coord, KTileIterator k_tile_iter, int k_tile_count, int thread_idx,
                           uint32_t block_rank_in_cluster, TensorStorage& shared_tensors) {
    constexpr int64_t kTileM = cute::size<0>(typename Base::TileShape{});
    const int32_t m = int32_t(cute::get<0>(blk_coord));
    const bool own = m >= p.own_tile_begin && m < p.own_tile_end;
    auto const& source = own ? p.own : static_cast<typename Base::Params const&>(p);
    // The tile row's shard (whole tile rows: it lies in one); none beyond M, and ours
    // needs no wait (read in place, or in the gathered buffer before the launch).
    const int64_t first = int64_t(m) * kTileM;
    const bool waits = !own && p.k_blocks_per_piece > 0 && first < p.ready.M;
    const int64_t shard = waits ? first / p.ready.shardRows : 0;
    if (!waits || shard == p.ready.dc.rank) {
      Base::load(source, pipeline, state, inputs, blk_coord, k_tile_iter, k_tile_count, thread_idx,
                 block_rank_in_cluster, shared_tensors);
      return;
    }
    while (k_tile_count > 0) {
      const int k = int(*k_tile_iter);
      const int piece = k / p.k_blocks_per_piece;
      const int n = cute::min(k_tile_count, (piece + 1) * p.k_blocks_per_piece - k);
      waitForPiece(p.ready, int(shard), uint32_t(piece + 1));
      Base::load(source, pipeline, state, inputs, blk_coord, k_tile_iter, n, thread_idx, block_rank_in_cluster,
                 shared_tensors);
      state.advance(n);
      for (int i = 0; i < n; ++i) ++k_tile_iter;
      k_tile_count -= n;
    }
  }

  // One lane waits (bounded: on giving up it records the error and returns, the
  // kernel finishing on whatever the buffer holds: readiness_scheduler.cuh); the
  // peer's copy engine or push kernel wrote the rows and TMA (the async proxy) reads
  // them next: the flag's acquire is ordered before those reads by the proxy fence.
  CUTLASS_DEVICE static void waitForPiece(ShardReadiness const& r, int shard, uint32_t pieces) {
    if (cute::elect_one_sync()) {
      fc::dev::waitAtLeast(r.dc, fc::Op::AllGatherMatmul, r.flags + shard, pieces, shard, r.channel,
                           fc::WaitKind::Shard);
      asm volatile("fence.proxy.async.global;" ::: "memory");
    }
    __syncwarp();
  }
};

}  // namespace fc::engine
