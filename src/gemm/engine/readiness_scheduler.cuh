// The engine's readiness-ordered tile scheduler, for both fused ops (the all-gather +
// GEMM engine uses it as is; the GEMM + reduce-scatter engine's ScatterTileScheduler,
// scatter_scheduler.cuh, derives from it): the schedule, apart from the compute (the
// stock CUTLASS sm90 warp-specialized persistent mainloop, allgather_gemm.cuh).
//
// CUTLASS's static persistent scheduler hands CTA i the output tiles i, i + grid,
// i + 2 grid, ... (raster along N: a wave covers whole rows of tiles). Ours does the
// same over *rotated* tile rows: tile row t becomes (t + t0) mod rows, t0 being the
// row holding ready.firstRow. For all-gather + GEMM that is this rank's first row of
// A: every CTA starts on the rows of our own shard, which are in place before the
// kernel starts, then moves through the rows of shards rank+1, rank+2, ... - the order
// in which the copy engine pulls them. For GEMM + reduce-scatter it is the first row of
// rank+1's block: the blocks other ranks own come first, ours last (the destination
// order of torch symm_mem's fused_matmul_reduce_scatter), and nothing is waited for
// (ready.flags NULL).
//
// Before the mainloop producer warp issues the TMA loads of a tile, it waits until
// the rows it reads of every shard have landed: a shard is pulled in pieces of
// pieceRows rows, and flags[s] = c once its first c pieces are in place (written by
// the copy engine, cuStreamWriteValue32 after each piece's pull, with a memory
// barrier, in this rank's own memory). Only that warp waits; the consumer warps wait as always,
// on the mainloop's shared-memory barriers, for the data it loads.
//
// Bounded: the wait goes through WaitExits (deadline, abort, a peer's give-up) and on
// giving up records the error and *continues* (later waits skip: the error guard is
// set). The kernel then finishes on whatever the buffer holds and the op reports the
// error; it never stops mid-pipeline, where the CTAs of a cluster (which multicast
// each other's B tiles) or the consumer warps would wait forever.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/gemm/kernel/sm90_tile_scheduler.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>

#include "device/device_comm.h"
#include "device/sync.cuh"
#include "gemm/engine/engine.h"

namespace fc::engine {

// The tag that selects ReadinessTileScheduler in CUTLASS's GemmUniversal.
struct ReadinessSchedulerTag {};

}  // namespace fc::engine

namespace cutlass::gemm::kernel::detail {

class ReadinessTileScheduler : public StaticPersistentTileScheduler<ReadinessTileScheduler> {
  using Base = StaticPersistentTileScheduler<ReadinessTileScheduler>;

 public:
  using RasterOrder = typename PersistentTileSchedulerSm90Params::RasterOrder;
  using RasterOrderOptions = typename PersistentTileSchedulerSm90Params::RasterOrderOptions;
  static constexpr bool IsDynamicPersistent = false;
  using Pipeline = PipelineEmpty;
  using PipelineStorage = typename Pipeline::SharedStorage;
  using ThrottlePipeline = PipelineEmpty;
  using ThrottlePipelineStorage = typename ThrottlePipeline::SharedStorage;
  struct CLCResponse {};
  class SharedStorage {
   public:
    CUTLASS_DEVICE PipelineStorage pipeline() { return PipelineStorage{}; }
    CUTLASS_DEVICE ThrottlePipelineStorage throttle_pipeline() { return ThrottlePipelineStorage{}; }
    CUTLASS_DEVICE CLCResponse* data() { return nullptr; }
  };

  struct Arguments {
    fc::engine::ShardReadiness ready;
    int max_swizzle_size = 1;  // the base's fields, read by the kernel's get_grid_shape
    RasterOrderOptions raster_order = RasterOrderOptions::AlongN;
  };

  struct Params : PersistentTileSchedulerSm90Params {
    fc::engine::ShardReadiness ready;
    int32_t blockM = 0;        // rows per tile
    int32_t firstTileRow = 0;  // t0: the tile row of our shard's first row
  };

  template <class ProblemShapeMNKL, class TileShape, class ClusterShape>
  static Params to_underlying_arguments(ProblemShapeMNKL problem_shape_mnkl, TileShape tile_shape,
                                        ClusterShape cluster_shape, KernelHardwareInfo const& hw_info,
                                        Arguments const& args, void* = nullptr, const uint32_t = 1, uint32_t = 1) {
    Params p;
    static_cast<PersistentTileSchedulerSm90Params&>(p) = Base::to_underlying_arguments(
        problem_shape_mnkl, tile_shape, cluster_shape, hw_info,
        typename Base::Arguments{args.max_swizzle_size, RasterOrderOptions::AlongN});
    p.ready = args.ready;
    p.blockM = int32_t(cute::size<0>(tile_shape));
    p.firstTileRow = int32_t(args.ready.firstRow / p.blockM);
    return p;
  }

  static bool can_implement(Arguments const& args) { return args.max_swizzle_size >= 0; }

  // The persistent grid: the stock one (the kernel passes our Arguments).
  template <class ProblemShapeMNKL, class BlockShape, class ClusterShape>
  CUTLASS_HOST_DEVICE static dim3 get_grid_shape(Params const& params, ProblemShapeMNKL problem_shape,
                                                 BlockShape cta_shape, ClusterShape cluster_shape,
                                                 KernelHardwareInfo hw_info, Arguments const& args,
                                                 bool truncate_by_problem_size = true) {
    return Base::get_grid_shape(params, problem_shape, cta_shape, cluster_shape, hw_info,
                                typename Base::Arguments{args.max_swizzle_size, args.raster_order},
                                truncate_by_problem_size);
  }

  CUTLASS_HOST_DEVICE ReadinessTileScheduler() {}
  CUTLASS_DEVICE explicit ReadinessTileScheduler(Params const& p) : Base(p), params_(p) {}

  // The CRTP base's mapping of a linear index to (m, n) tiles: the stock one.
  static CUTLASS_DEVICE cute::tuple<int32_t, int32_t> get_work_idx_m_and_n(
      uint64_t blk_per_grid_dim, FastDivmodU64Pow2 const& divmod_cluster_shape_major,
      FastDivmodU64Pow2 const& divmod_cluster_shape_minor, FastDivmodU64 const& divmod_cluster_blk_major,
      int32_t log_swizzle_size, RasterOrder raster_order) {
    return PersistentTileSchedulerSm90::get_work_idx_m_and_n(blk_per_grid_dim, divmod_cluster_shape_major,
                                                             divmod_cluster_shape_minor, divmod_cluster_blk_major,
                                                             log_swizzle_size, raster_order);
  }

  template <class ProblemShape, class ElementAccumulator>
  static size_t get_workspace_size(Arguments const&, ProblemShape, KernelHardwareInfo const&, uint32_t,
                                   const uint32_t = 1, uint32_t = 1) {
    return 0;
  }
  template <class ProblemShape, class ElementAccumulator>
  static cutlass::Status initialize_workspace(Arguments const&, void*, cudaStream_t, ProblemShape,
                                              KernelHardwareInfo const&, uint32_t, const uint32_t = 1, uint32_t = 1,
                                              CudaHostAdapter* = nullptr) {
    return Status::kSuccess;
  }

  // The kernels' work loops call these (every warp); they return tiles in our order,
  // and in the mainloop producer warp only once the tile's rows have landed.
  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape cluster_shape) {
    return ready(Base::initial_work_tile_info(cluster_shape));
  }
  // The ping-pong kernel advances by itself and then asks for the current tile (the
  // base's own fetch_next_work calls the base's get_current_work, not this one).
  CUTLASS_DEVICE WorkTileInfo get_current_work() const { return ready(Base::get_current_work()); }
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo work_tile_info) {
    auto [next, more] = Base::fetch_next_work(work_tile_info);
    return cute::make_tuple(ready(next), more);
  }
  template <class TileSchedulerPipeline, class TileSchedulerPipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo work_tile_info, TileSchedulerPipeline&,
                                      TileSchedulerPipelineState) {
    return fetch_next_work(work_tile_info);
  }

 protected:
  // Rotate the tile row; the mainloop producer warp then waits for its shards.
  CUTLASS_DEVICE WorkTileInfo ready(WorkTileInfo w) const {
    if (!w.is_valid()) return w;
    // Tile rows, rounded up to whole clusters (problem_tiles_m_ counts clusters).
    const int32_t rows = int32_t(params_.problem_tiles_m_ * params_.cluster_shape_m_);
    w.M_idx = (w.M_idx + params_.firstTileRow) % rows;
    // Warp 0 of warp group 0 issues the mainloop's TMA loads (ProducerWarpRole::Mainloop
    // of the cooperative and the ping-pong kernels).
    // Shards landing in pieces of K columns are waited for by the mainloop, per piece.
    if (params_.ready.flags != nullptr && params_.ready.kPieceCols == 0 && cutlass::canonical_warp_group_idx() == 0 &&
        cutlass::canonical_warp_idx_sync() % 4 == 0)
      waitForRows(w.M_idx);
    return w;
  }

  CUTLASS_DEVICE void waitForRows(int32_t tileRow) const {
    const fc::engine::ShardReadiness& r = params_.ready;
    const int64_t first = int64_t(tileRow) * params_.blockM;
    const int64_t last = (first + params_.blockM < r.M ? first + params_.blockM : r.M) - 1;
    if (first < r.M && cute::elect_one_sync()) {
      for (int64_t s = first / r.shardRows; s <= last / r.shardRows; ++s) {
        // The pieces of shard s up to the tile's last row in it.
        const int64_t end = last < (s + 1) * r.shardRows ? last : (s + 1) * r.shardRows - 1;
        if (int(s) != r.dc.rank) waitForShard(int(s), uint32_t((end - s * r.shardRows) / r.pieceRows + 1));
      }
      // The rows were written by the copy engine and are read next by TMA (the async
      // proxy): order the flag's acquire before those reads.
      asm volatile("fence.proxy.async.global;" ::: "memory");
    }
    __syncwarp();
  }

  // System scope: the writer is a copy engine or a peer's SMs (FC_AGMM_ENGINE_PUSH=sm,
  // fused/shard_push.cu). After a give-up (ours or
  // another CTA's) nothing waits any more: see above.
  CUTLASS_DEVICE void waitForShard(int s, uint32_t pieces) const {
    const fc::engine::ShardReadiness& r = params_.ready;
    fc::dev::waitAtLeast(r.dc, fc::Op::AllGatherMatmul, r.flags + s, pieces, s, r.channel, fc::WaitKind::Shard);
  }

 private:
  Params params_;
};

template <class ArchTag, class TileShape, class ClusterShape, uint32_t SchedulerPipelineStageCount>
struct TileSchedulerSelector<fc::engine::ReadinessSchedulerTag, ArchTag, TileShape, ClusterShape,
                             SchedulerPipelineStageCount> {
  using Scheduler = ReadinessTileScheduler;
};

}  // namespace cutlass::gemm::kernel::detail
