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
//
// Agathered from the stages (ptr_A_store, FC_AGMM_AGATHERED=stages): a caller's
// Agathered filled by the GEMM itself. Every tile row of A is loaded once per column
// of tiles; the tiles of column 0 also store each k-block's A stage, as it landed in
// shared memory, into Agathered at the same coordinates (a TMA store over the same
// swizzled stage layout), instead of the copy engine reading the rows a second time
// beside the GEMM. The producer loads such a tile one k-block at a time; once k-block
// j + kStoreLag has been issued it waits for k-block j's full barrier (by then it has
// most likely landed: the producer keeps its lead) and stores that stage, one bulk
// group per store. Before each load, at most one store may still read shared memory:
// the stage a load overwrites held k-block j - kStages, whose store went out before
// the store of j - kStages + 1 (kStoreLag = kStages - 2), so waiting until one group
// is left reading (cp.async.bulk.wait_group.read 1) frees it. At a tile's end the rest
// go out; every load of a tile that stores nothing waits for all of them first. The
// same lane issues, commits and waits (bulk groups are per thread), and the kernel's
// producer waits for their completion (writes included) before it ends (load_tail).
// Measured (2 H200s, 2026-11-30, ef6bc47 and e689b97): exact, at 2 ranks and at 4
// sharing the GPUs, but slower than the copy beside the GEMM at every shape: 1024 x
// 3072 x 4096 101 us against 55; and slower still (122) with the stores spread over the
// columns of tiles (tile column n storing k-blocks kb % tilesN == n), so the cost is in
// the storing tiles' producer (one k-block per load, a full-barrier wait per store),
// not in one CTA's store bandwidth. Probe build only (comm/config.cc); design.md,
// "Agathered beside the GEMM".
#pragma once

#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
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
  using SmemLayoutA = typename Base::SmemLayoutA;
  using TileShape = typename Base::TileShape;
  using StrideA = typename Base::StrideA;
  static constexpr int kStages = Base::K_PIPE_MAX;
  static constexpr int kStoreLag = kStages - 2;  // see the top
  static_assert(kStages >= 3, "Agathered from the stages keeps one store in flight per load");
  // The TMA store of one A stage into an [M, K] buffer (the load's descriptor, store-wise,
  // no multicast).
  using TmaStoreA = decltype(cute::make_tma_copy_A_sm90(
      cute::SM90_TMA_STORE{},
      cute::make_tensor(static_cast<ElementA*>(nullptr), cute::repeat_like(StrideA{}, int32_t(0)), StrideA{}),
      SmemLayoutA{}(cute::_, cute::_, cute::Int<0>{}), TileShape{}, cute::Shape<cute::_1, cute::_1, cute::_1>{}));

  struct Arguments : Base::Arguments {
    const ElementA* ptr_A_own = nullptr;  // row ownFirstRow of A, in place; NULL: none
    int64_t own_first_row = 0;            // the first row of A it holds
    int64_t own_rows = 0;                 // how many
    ShardReadiness ready{};               // kPieceCols > 0: the waits per piece of K
    // Agathered from the stages (see the top): [M, K] with A's row stride; NULL: none.
    ElementA* ptr_A_store = nullptr;
    bool store_own = true;  // also the tile rows read in place (false: they are there already)
  };

  struct Params : Base::Params {
    // The own rows' descriptor with the same B (the stock load takes both from one
    // Params): Base::load runs on `own` for own tile rows, on the base for the rest.
    typename Base::Params own;
    int32_t own_tile_begin = 0, own_tile_end = 0;  // tile rows [begin, end) read in place
    ShardReadiness ready{};
    int32_t k_blocks_per_piece = 0;  // 0: no waits here (the scheduler's, by rows)
    TmaStoreA tma_store_a;
    bool stores = false, store_own = true;
    int32_t m = 0, k = 0;  // the problem's M and K (Agathered's extent)
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
    if (args.ptr_A_store != nullptr) {
      auto shape = cute::append<4>(problem_shape, 1);
      const int m = int(cute::get<0>(shape)), k = int(cute::get<2>(shape)), l = int(cute::get<3>(shape));
      auto agathered = cute::make_tensor(args.ptr_A_store, cute::make_layout(cute::make_shape(m, k, l), args.dA));
      p.tma_store_a = cute::make_tma_copy_A_sm90(cute::SM90_TMA_STORE{}, agathered,
                                                 SmemLayoutA{}(cute::_, cute::_, cute::Int<0>{}), TileShape{},
                                                 cute::Shape<cute::_1, cute::_1, cute::_1>{});
      p.stores = true;
      p.store_own = args.store_own;
      p.m = m;
      p.k = k;
    }
    return p;
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& p) {
    Base::prefetch_tma_descriptors(p);
    Base::prefetch_tma_descriptors(p.own);  // own tile rows load B through `own` too
    if (p.stores) cute::prefetch_tma_descriptor(p.tma_store_a.get_tma_descriptor());
  }

  // The kernel's producer, after its last tile: our stores complete (their writes too)
  // before the grid ends, so that the op's stream sees Agathered whole.
  template <class Pipeline, class PipelineState>
  CUTLASS_DEVICE void load_tail(Pipeline pipeline, PipelineState state) {
    if (cutlass::canonical_lane_idx() == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    __syncwarp();
    Base::load_tail(pipeline, state);
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
    const bool pieceWaits = waits && shard != p.ready.dc.rank;
    // Agathered from the stages: column 0's tiles (own rows only where not in place).
    const bool stores = p.stores && int32_t(cute::get<1>(blk_coord)) == 0 && (p.store_own || !own);
    if (p.stores && !stores) storesRead<0>();  // this tile's loads may overwrite any stage
    if (!pieceWaits && !stores) {
      Base::load(source, pipeline, state, inputs, blk_coord, k_tile_iter, k_tile_count, thread_idx,
                 block_rank_in_cluster, shared_tensors);
      return;
    }
    const PipelineState tileFirst = state;  // k-block 0 of this tile's stage and phase
    const int k0 = int(*k_tile_iter);
    int issued = 0, stored = 0;
    while (k_tile_count > 0) {
      const int k = int(*k_tile_iter);
      int n = k_tile_count;
      if (pieceWaits) {
        const int piece = k / p.k_blocks_per_piece;
        n = cute::min(n, (piece + 1) * p.k_blocks_per_piece - k);
        if (issued == 0 || k % p.k_blocks_per_piece == 0) waitForPiece(p.ready, int(shard), uint32_t(piece + 1));
      }
      if (stores) {
        n = 1;
        storesRead<1>();  // the stage this load overwrites is read out (see the top)
      }
      Base::load(source, pipeline, state, inputs, blk_coord, k_tile_iter, n, thread_idx, block_rank_in_cluster,
                 shared_tensors);
      state.advance(n);
      for (int i = 0; i < n; ++i) ++k_tile_iter;
      k_tile_count -= n;
      issued += n;
      if (stores && issued - stored > kStoreLag) storeStage(p, pipeline, tileFirst, stored++, m, k0, shared_tensors);
    }
    while (stores && stored < issued) storeStage(p, pipeline, tileFirst, stored++, m, k0, shared_tensors);
  }

  // Until at most `pending` of our bulk groups still read shared memory.
  template <int pending>
  CUTLASS_DEVICE static void storesRead() {
    if (cutlass::canonical_lane_idx() == 0) cute::tma_store_wait<pending>();
    __syncwarp();
  }

  // Store k-block j of the tile (stage: tileFirst advanced by j) into Agathered at tile
  // row m, k-block k0 + j, once its load has landed: the stage's full barrier, waited for
  // as its consumers wait (neither arriving nor releasing anything). The producer's state
  // holds the inverted phase (its start state is 1: the buffers begin empty), so the
  // consumers' parity is phase ^ 1. (With the producer's own parity the wait was for the
  // stage's *next* load, which this producer issues only after it: the first GPU run of
  // this hung there, 898a1c7.)
  template <class Pipeline, class PipelineState, class TensorStorage>
  CUTLASS_DEVICE static void storeStage(Params const& p, Pipeline& pipeline, PipelineState stage, int j, int32_t m,
                                        int k0, TensorStorage& shared_tensors) {
    stage.advance(uint32_t(j));
    if (cutlass::canonical_lane_idx() == 0) {
      cutlass::arch::ClusterBarrier::wait(pipeline.producer_get_barrier(stage), stage.phase() ^ 1u);
      // Written by TMA (the async proxy) and read by TMA: no proxy fence needed; the
      // barrier's completion orders the landed bytes before this read.
      cute::Tensor sA = cute::make_tensor(cute::make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});
      cute::Tensor mA = p.tma_store_a.get_tma_tensor(cute::make_shape(p.m, p.k, 1));
      cute::Tensor gA = cute::local_tile(mA, TileShape{}, cute::make_coord(cute::_, cute::_, cute::_),
                                         cute::Step<cute::_1, cute::X, cute::_1>{});  // (BLK_M,BLK_K,m,k,l)
      auto slice = p.tma_store_a.get_slice(0);
      cute::Tensor tSsA = slice.partition_S(sA);                     // (TMA,TMA_M,TMA_K,PIPE)
      cute::Tensor tSgA = slice.partition_D(gA(cute::_, cute::_, m, cute::_, 0));  // (TMA,TMA_M,TMA_K,k)
      cute::copy(p.tma_store_a, tSsA(cute::_, cute::_, cute::_, stage.index()), tSgA(cute::_, cute::_, cute::_, k0 + j));
      cute::tma_store_arrive();
    }
    __syncwarp();
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
