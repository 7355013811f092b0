// The GEMM + reduce-scatter engine's tile scheduler: the all-gather engine's tile
// order (readiness_scheduler.cuh: tile rows rotated so that the blocks other ranks own
// come first, ours last), handed out dynamically: a cluster takes the next tile in
// that order when it is ready for one, by an atomic add on a per-channel ticket in
// device memory, instead of CTA i taking tiles i, i + grid, ... .
//
// Why: with the epilogue add (own_block_epilogue.cuh) our own tiles wait inside the
// GEMM for the peer's partial of our block, which the peer's GEMM computes first. With
// tiles bound to CTAs, a CTA that cannot start - its SM held by another kernel, e.g.
// another stream's collective that itself waits for the peer - still owes the peer its
// share of the peer's block, while our started CTAs may already wait for the peer's
// partial, and the peer's for ours: a cycle that only the deadline broke (engine-pair
// with grids too large to be resident side by side: one H100, docs/perf-log.md).
// Handed out in order, every tile a peer waits for has been taken, before any of our
// own tiles, by a cluster that runs, and a cluster that runs never waits for anything
// but the peer's tiles of the same kind: the GEMM progresses as long as one cluster
// of each rank runs. (So the epilogue add waits for nothing else either: it reads the
// peer's partial in place once the peer's tile counters say it has landed, with no
// copy-engine pull behind a gate kernel, which would need an SM of its own:
// own_block_epilogue.cuh.) It also evens out clusters that run slower (a late start)
// where the static split leaves the last wave to them.
//
// Cost (tools/probes/gemm-configs on one H100, docs/perf-log.md): the pipeline of
// tiles costs the GEMM alone 1-6 us per call at 512-8192 rows against the all-gather
// engine's static scheduler (which needs none); handing the same static order out
// through it was no cheaper than the dynamic hand-out, so there is one flow.
//
// How it plugs into CUTLASS's sm90 kernels (their dynamic persistent hooks; the
// pipelines: ticket_pipeline.cuh): every thread's initial_work_tile_info draws the
// cluster's first ticket (CTA 0's thread 0 draws, stores it into each CTA's shared
// memory, and a cluster barrier publishes it); then CTA 0's scheduler warp (producer
// warp 1) draws each next ticket, one tile ahead of the mainloop producer, and writes
// it into every CTA's stage. A ticket past the tiles ends the CTA's work.
//
// Interleaved (2 ranks, the epilogue add, Arguments::lead > 0): the tickets walk the
// cluster rows in interleave.h's order, the pieces of the peer's block and ours
// alternating, so that the reads of the peer's partials spread over the GEMM (the
// progress argument holds there too: interleave.h).
//
// The ticket goes back to zero in the GEMM itself: every cluster draws exactly one
// ticket past the tiles (the one that ends its work, possibly its first), so the
// cluster that draws tiles + clusters - 1 draws last and stores zero; the next call's
// GEMM on this channel starts after this grid has ended (stream order).
#pragma once

#include <cute/tensor.hpp>

#include "gemm/engine/interleave.h"
#include "gemm/engine/readiness_scheduler.cuh"
#include "gemm/engine/ticket_pipeline.cuh"

namespace fc::engine {

// The tag that selects ScatterTileScheduler in CUTLASS's GemmUniversal; kPingpong:
// the kernel schedule, which decides where the kernel asks for the first tile.
template <bool kPingpong>
struct ScatterSchedulerTag {};

}  // namespace fc::engine

namespace cutlass::gemm::kernel::detail {

template <bool kPingpong>
class ScatterTileScheduler : public ReadinessTileScheduler {
  using Base = ReadinessTileScheduler;

 public:
  static constexpr bool IsDynamicPersistent = true;
  static constexpr int kStages = 4;  // tiles in flight per cluster: 2 ping-pong consumers + 1 ahead, rounded up
  using Pipeline = fc::engine::TicketPipeline<kStages>;
  using PipelineStorage = typename Pipeline::SharedStorage;
  using ThrottlePipeline = fc::engine::LeaderThrottle<kStages>;
  using ThrottlePipelineStorage = typename ThrottlePipeline::SharedStorage;
  struct CLCResponse {  // a stage's slot: the ticket (kNoTile: none)
    uint32_t ticket;
  };
  static constexpr uint32_t kNoTile = 0xffffffffu;

  class SharedStorage {
   public:
    CUTLASS_DEVICE PipelineStorage& pipeline() { return pipeline_; }
    CUTLASS_DEVICE ThrottlePipelineStorage& throttle_pipeline() { return throttle_; }
    // The kernel hands this back to set_data_ptr: the whole storage, as its slots.
    CUTLASS_DEVICE CLCResponse* data() { return reinterpret_cast<CLCResponse*>(this); }

    alignas(16) PipelineStorage pipeline_;
    alignas(16) ThrottlePipelineStorage throttle_;
    CLCResponse slots_[kStages];
    CLCResponse first_;  // the cluster's first ticket
  };

  struct Arguments : Base::Arguments {
    uint32_t* ticket = nullptr;  // zero before the kernel; zero again after it
    // Interleaved (interleave.h): pieces of the peer's block ahead of our first; 0: the
    // plain order. Blocks and pieces in rows (2 blocks: M = 2 x blockRows).
    uint32_t lead = 0;
    int64_t blockRows = 0, pieceRows = 0;
  };
  struct Params : Base::Params {
    uint32_t* ticket = nullptr;
    uint32_t clusterTiles = 0;  // the tickets that are tiles
    // Interleaved: in cluster rows (0: the plain order); clusters per cluster row.
    uint32_t lead = 0, blockClusterRows = 0, pieceClusterRows = 0, clustersN = 1;
  };

  template <class ProblemShapeMNKL, class TileShape, class ClusterShape>
  static Params to_underlying_arguments(ProblemShapeMNKL problem_shape_mnkl, TileShape tile_shape,
                                        ClusterShape cluster_shape, KernelHardwareInfo const& hw_info,
                                        Arguments const& args, void* = nullptr, const uint32_t = 1, uint32_t = 1) {
    Params p;
    static_cast<Base::Params&>(p) =
        Base::to_underlying_arguments(problem_shape_mnkl, tile_shape, cluster_shape, hw_info, args);
    p.ticket = args.ticket;
    p.clusterTiles = uint32_t(p.blocks_per_problem_ / (uint64_t(p.cluster_shape_m_) * p.cluster_shape_n_));
    // Tickets are cluster tiles in raster order along N (no swizzle: the epilogue add
    // runs without bands), so ticket t is cluster row t / clustersN. Interleaved only
    // where blocks and pieces are whole cluster rows and there are exactly 2 blocks.
    const int64_t clusterRows = int64_t(p.blockM) * p.cluster_shape_m_;
    if (args.lead > 0 && p.log_swizzle_size_ == 0 && p.raster_order_ == RasterOrder::AlongN && p.cluster_shape_n_ == 1 &&
        args.blockRows > 0 && args.blockRows % clusterRows == 0 && args.pieceRows > 0 &&
        args.pieceRows % clusterRows == 0 && int64_t(p.problem_tiles_m_) * clusterRows == 2 * args.blockRows) {
      p.lead = args.lead;
      p.blockClusterRows = uint32_t(args.blockRows / clusterRows);
      p.pieceClusterRows = uint32_t(args.pieceRows / clusterRows);
      p.clustersN = p.problem_tiles_n_;
    }
    return p;
  }

  CUTLASS_HOST_DEVICE ScatterTileScheduler() {}
  CUTLASS_DEVICE explicit ScatterTileScheduler(Params const& p)
      : Base(p),
        ticket_(p.ticket),
        clusterTiles_(p.clusterTiles),
        lead_(p.lead),
        blockClusterRows_(p.blockClusterRows),
        pieceClusterRows_(p.pieceClusterRows),
        clustersN_(p.clustersN) {}

  CUTLASS_DEVICE void set_data_ptr(CLCResponse* storage) { storage_ = reinterpret_cast<SharedStorage*>(storage); }

  // Every thread of the CTA, once. The ping-pong kernel calls it between the cluster
  // barrier's arrive and wait that publish its pipelines' initialisation, the
  // cooperative kernel after both: ours goes in between (a wait for the kernel's
  // arrive first and an arrive for its wait last, in the ping-pong kernel), so the
  // barrier's phases still pair up. The plain store into the other CTA's shared memory
  // is published by the barrier's arrive (release) and wait (acquire).
  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    static_assert(cute::size(ClusterShape{}) > 1, "the dynamic scheduler is written for clusters of 2 or more CTAs");
    if constexpr (kPingpong) cute::cluster_wait();
    if (fc::engine::clusterLeader() && threadIdx.x == 0) {
      const uint32_t t = draw();
      const uint32_t local = cute::cast_smem_ptr_to_uint(&storage_->first_.ticket);
      for (uint32_t c = 0; c < fc::engine::clusterCtas(); ++c)
        asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(cute::set_block_rank(local, c)), "r"(t) : "memory");
    }
    __syncwarp();
    cute::cluster_arrive();
    cute::cluster_wait();
    const uint32_t t = *reinterpret_cast<volatile uint32_t*>(&storage_->first_.ticket);
    if constexpr (kPingpong) cute::cluster_arrive_relaxed();
    return tileOf(t);
  }

  // CTA 0's scheduler warp (all lanes): the next ticket into every CTA's stage.
  CUTLASS_DEVICE auto advance_to_next_work(Pipeline& pipeline, typename Pipeline::PipelineState state) const {
    if (fc::engine::clusterLeader()) {
      pipeline.producer_acquire(state);
      uint32_t t = 0;
      if (cutlass::canonical_lane_idx() == 0) t = draw();
      t = __shfl_sync(0xffffffffu, t, 0);
      pipeline.publish(state, &storage_->slots_[state.index()].ticket, t);
    }
    ++state;
    return state;
  }

  // The kernels' end: the scheduler warp writes one stage more that holds no tile, for
  // the roles that read one more than the tiles they worked on (ping-pong).
  CUTLASS_DEVICE void store_invalid_response(typename Pipeline::PipelineState state) {
    // (The kernel passes no pipeline: this one writes through the storage's barriers.)
    Pipeline pipeline = attached();
    pipeline.publish(state, &storage_->slots_[state.index()].ticket, kNoTile);
  }

  // Every role: the next tile from the stage.
  template <class TileSchedulerPipeline, class TileSchedulerPipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo, TileSchedulerPipeline& pipeline,
                                      TileSchedulerPipelineState state) {
    pipeline.consumer_wait(state);
    const uint32_t t = *reinterpret_cast<volatile uint32_t*>(&storage_->slots_[state.index()].ticket);
    pipeline.consumer_release(state);
    return cute::make_tuple(tileOf(t), true);
  }
  // (Called only for split work, which this scheduler never makes.)
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo w) { return cute::make_tuple(w, true); }

 private:
  // One ticket; the last one of the grid puts the counter back to zero (see above).
  CUTLASS_DEVICE uint32_t draw() const {
    const uint32_t t = atomicAdd(ticket_, 1u);
    if (t == clusterTiles_ + clusters() - 1) atomicExch(ticket_, 0u);
    return t;
  }

  CUTLASS_DEVICE static uint32_t clusters() { return gridDim.x * gridDim.y * gridDim.z / fc::engine::clusterCtas(); }

  // Ticket t: the first CTA's linear index of cluster tile t in the static scheduler's
  // order (it maps the CTA's place in its cluster itself), interleaved, rotated.
  CUTLASS_DEVICE WorkTileInfo tileOf(uint32_t t) const {
    if (t >= clusterTiles_) return WorkTileInfo::invalid_work_tile();
    if (lead_ > 0) {
      const uint32_t row = t / clustersN_, col = t - row * clustersN_;
      t = fc::engine::interleavedRow(row, blockClusterRows_, pieceClusterRows_, lead_) * clustersN_ + col;
    }
    return ready(get_current_work_for_linear_idx(uint64_t(t) * fc::engine::clusterCtas()));
  }

  // A view of the ticket pipeline over this storage (no initialisation: the kernel's
  // own pipeline object did it).
  CUTLASS_DEVICE Pipeline attached() const { return Pipeline(storage_->pipeline_); }

  uint32_t* ticket_ = nullptr;
  uint32_t clusterTiles_ = 0;
  uint32_t lead_ = 0, blockClusterRows_ = 0, pieceClusterRows_ = 0, clustersN_ = 1;
  SharedStorage* storage_ = nullptr;
};

template <class ArchTag, class TileShape, class ClusterShape, uint32_t SchedulerPipelineStageCount, bool kPingpong>
struct TileSchedulerSelector<fc::engine::ScatterSchedulerTag<kPingpong>, ArchTag, TileShape, ClusterShape,
                             SchedulerPipelineStageCount> {
  using Scheduler = ScatterTileScheduler<kPingpong>;
};

}  // namespace cutlass::gemm::kernel::detail
