// A stream-K tile scheduler in shard order, for the all-gather engine at small M
// (design.md, "Small M", item 2): a probe of its GEMM alone (gemm-configs), not yet the
// library's. The rows come in S segments (the shards, in the order the engine meets
// them: our own first). Within a segment every k-iteration of every cluster tile (a 2 x 1
// cluster's two 128-row tiles and one column of tiles; k-blocks of 64) is laid out in a
// row, tile after tile, and split evenly over the persistent grid's cluster slots: slot g
// takes [g U / G, (g + 1) U / G) of the segment's U iterations. So every SM works from the
// start (no partial wave) and every slot finishes segment s before it needs segment s + 1
// (in the op: our own rows while the peers' land).
//
// A tile split across slots is summed through fp32 partials: the part that holds the
// tile's last k-block computes the epilogue after adding the earlier parts' partials in k
// order (deterministic); every other part stores its partial into its slot's workspace
// and raises its flag. Each slot runs its parts of a segment in reverse, so the part a
// neighbour waits for (the head of the tile its range ends in) comes first and the part
// that waits (the tail of the tile its range starts in) last: no slot waits for work that
// is queued behind a wait (the grid is persistent, one CTA an SM, all resident).
//
// Only for CUTLASS's sm90 cooperative kernel (it calls fixup and compute_epilogue; the
// ping-pong kernel does not take split tiles). The waits are bounded (kSpinLimit polls,
// then the kernel traps): a probe's, not the library's never-hang machinery.
//
// Measurement switches (Params::mode, gemm_configs_streamk.cu reads them from the
// environment): kNoWait, the final parts neither wait for nor add the earlier parts;
// kNoStore (only with kNoWait), the other parts store no partial and raise no flag; the
// numbers are then wrong, the time is the schedule's without its fixup. Params::stamps:
// the first consumer warp group's leader stamps each part (clock64: the part fetched, its
// mainloop done, its fixup done) for a timeline of where a slot's time goes.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/block_striped.h>
#include <cutlass/gemm/kernel/sm90_tile_scheduler.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>

#include <cstdint>

namespace fc::engine::probe {
struct ShardStreamKTag {};
}  // namespace fc::engine::probe

namespace cutlass::gemm::kernel::detail {

class ShardStreamKScheduler {
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

  static constexpr int kClusterM = 2;  // 2 x 1 clusters
  static constexpr uint64_t kSpinLimit = uint64_t(1) << 26;  // ~5-10 s of polls
  static constexpr int kNoWait = 1, kNoStore = 2;  // Params::mode bits
  // The timeline: per CTA kMaxParts records of kStampWords (fetched, mainloop done,
  // fixup done, info = k-blocks | final << 16 | earlier parts waited for << 20; a record
  // with info ~0 marks the CTA's end).
  static constexpr int kMaxParts = 32, kStampWords = 4;

  struct WorkTileInfo {
    int32_t M_idx = 0;
    int32_t N_idx = 0;
    int32_t K_idx = 0;  // the part's first k-block
    int32_t L_idx = 0;
    uint32_t k_tile_count = 0;
    bool final = true;       // holds the tile's last k-block: computes the epilogue
    int32_t segment = 0;
    int32_t slot = 0;        // this cluster slot
    int32_t firstSlot = 0;   // a split final part: the earlier parts are in slots [firstSlot, slot)
    int32_t part = 0;        // this slot's part count so far (the timeline's record)
    CUTLASS_HOST_DEVICE bool is_valid() const { return k_tile_count > 0; }
    CUTLASS_HOST_DEVICE int32_t reduction_subtile_idx() const { return -1; }
    CUTLASS_HOST_DEVICE bool whole(uint32_t kTiles) const { return K_idx == 0 && k_tile_count == kTiles; }
  };

  struct Arguments {
    int segments = 2;            // the shards, equal runs of cluster rows
    float* partials = nullptr;   // workspaceBytes(): [segment][slot][cta of cluster][tile]
    uint32_t* flags = nullptr;   // flagWords(): [segment][slot][cta][consumer warp group], zero
    int max_swizzle_size = 1;    // read by the kernel's get_grid_shape; unused
    RasterOrderOptions raster_order = RasterOrderOptions::AlongN;
    int mode = 0;                // kNoWait | kNoStore: measurement only
    int slots = 0;               // cluster slots (the grid / 2); 0: every SM's
    unsigned long long* stamps = nullptr;  // [cta][kMaxParts][kStampWords] or null
  };

  struct Params {
    // Read by the kernel's get_grid_shape.
    int32_t log_swizzle_size_ = 0;
    RasterOrder raster_order_ = RasterOrder::AlongN;
    int32_t tilesN = 0, clusterRows = 0, kTiles = 0, segments = 1, slots = 1, tileElems = 0;
    float* partials = nullptr;
    uint32_t* flags = nullptr;
    int mode = 0;
    unsigned long long* stamps = nullptr;
  };

  // The workspace for `slots` cluster slots (the grid's CTAs / 2).
  static size_t workspaceBytes(int segments, int slots, int tileM, int tileN) {
    return size_t(segments) * size_t(slots) * kClusterM * size_t(tileM) * size_t(tileN) * sizeof(float);
  }
  static size_t flagWords(int segments, int slots) { return size_t(segments) * size_t(slots) * kClusterM * 2; }

  template <class ProblemShapeMNKL, class TileShape, class ClusterShape>
  static Params to_underlying_arguments(ProblemShapeMNKL problem_shape_mnkl, TileShape tile_shape, ClusterShape,
                                        KernelHardwareInfo const& hw_info, Arguments const& args, void* = nullptr,
                                        const uint32_t = 1, uint32_t = 1) {
    Params p;
    const int M = int(cute::get<0>(problem_shape_mnkl)), N = int(cute::get<1>(problem_shape_mnkl));
    const int K = int(cute::get<2>(problem_shape_mnkl));
    const int tm = int(cute::size<0>(tile_shape)), tn = int(cute::size<1>(tile_shape)), tk = int(cute::size<2>(tile_shape));
    p.tilesN = (N + tn - 1) / tn;
    p.clusterRows = (M + tm * kClusterM - 1) / (tm * kClusterM);
    p.kTiles = (K + tk - 1) / tk;
    p.segments = args.segments < 1 ? 1 : args.segments > p.clusterRows ? p.clusterRows : args.segments;
    p.slots = args.slots > 0 && args.slots < hw_info.sm_count / kClusterM ? args.slots : hw_info.sm_count / kClusterM;
    p.tileElems = tm * tn;
    p.partials = args.partials;
    p.flags = args.flags;
    p.mode = args.mode & kNoWait ? args.mode : 0;  // no store without no wait: the waits would never end
    p.stamps = args.stamps;
    return p;
  }

  static bool can_implement(Arguments const& args) { return args.partials != nullptr && args.flags != nullptr; }

  template <class ProblemShapeMNKL, class BlockShape, class ClusterShape>
  CUTLASS_HOST_DEVICE static dim3 get_grid_shape(Params const& params, ProblemShapeMNKL, BlockShape, ClusterShape,
                                                 KernelHardwareInfo, Arguments const&, bool = true) {
    return dim3(uint32_t(params.slots * kClusterM), 1, 1);
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

  CUTLASS_HOST_DEVICE ShardStreamKScheduler() {}
  CUTLASS_DEVICE explicit ShardStreamKScheduler(Params const& p) : params_(p) {
    slot_ = int32_t(blockIdx.x) / kClusterM;
    cta_ = int32_t(blockIdx.x) % kClusterM;
    segment_ = 0;
    pos_ = rangeEnd(0, slot_);
  }

  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    return stamped(advance());
  }
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo) { return cute::make_tuple(stamped(advance()), false); }
  template <class TileSchedulerPipeline, class TileSchedulerPipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo w, TileSchedulerPipeline&, TileSchedulerPipelineState) {
    return fetch_next_work(w);
  }
  CUTLASS_DEVICE bool is_last_tile(WorkTileInfo, uint32_t = 1) const {
    ShardStreamKScheduler copy = *this;
    return !copy.advance().is_valid();
  }

  template <class ProblemShape, class TileShape>
  CUTLASS_HOST_DEVICE static uint32_t get_work_k_tile_count(WorkTileInfo const& w, ProblemShape, TileShape) {
    return w.k_tile_count;
  }
  CUTLASS_HOST_DEVICE static uint32_t get_work_k_tile_start(WorkTileInfo const& w) { return uint32_t(w.K_idx); }
  CUTLASS_HOST_DEVICE static bool requires_separate_reduction(Params const&) { return false; }
  CUTLASS_DEVICE static bool valid_warpgroup_in_work_tile(WorkTileInfo const&) { return true; }
  CUTLASS_HOST_DEVICE static bool compute_epilogue(WorkTileInfo const& w, Params const&) {
    return w.is_valid() && w.final;
  }

  // The sum of a split tile (every thread of consumer warp group barrier_idx, on its
  // accumulators, after its mainloop).
  template <class FrgTensorC>
  CUTLASS_DEVICE static void fixup(Params const& p, WorkTileInfo const& w, FrgTensorC& accumulators,
                                   uint32_t /*num_barriers*/, uint32_t barrier_idx) {
    if (!w.is_valid()) return;
    const bool leader = p.stamps != nullptr && threadIdx.x == NumThreadsPerWarpGroup;
    unsigned long long* record = leader && w.part < kMaxParts ? stamp(p, w.part) : nullptr;
    if (record != nullptr) record[1] = clock64();
    if (w.whole(uint32_t(p.kTiles)) || (p.mode & (w.final ? kNoWait : kNoStore))) {
      if (record != nullptr) record[2] = clock64();
      return;
    }
    constexpr int kPerThread = int(cute::size(FrgTensorC{}));
    using Array = cutlass::Array<typename FrgTensorC::value_type, kPerThread>;
    using Striped = cutlass::BlockStripedReduce<NumThreadsPerWarpGroup, Array>;
    const int tid = int(threadIdx.x % NumThreadsPerWarpGroup);
    // CUTLASS reserves two named barriers for stream-K's fixup, one per consumer warp group.
    const auto barrier = barrier_idx == 0 ? cutlass::arch::ReservedNamedBarriers::StreamkBarrier0
                                          : cutlass::arch::ReservedNamedBarriers::StreamkBarrier1;
    Array* acc = reinterpret_cast<Array*>(accumulators.data());
    const int cta = int(blockIdx.x) % kClusterM;
    if (!w.final) {
      // Our partial into our slot's workspace, then the flag (release: the partial first).
      Striped::store(reinterpret_cast<Array*>(partial(p, w.segment, w.slot, cta, barrier_idx, kPerThread)), *acc, tid);
      cutlass::arch::NamedBarrier::arrive_and_wait(NumThreadsPerWarpGroup, barrier);
      if (tid == 0) {
        uint32_t* f = flag(p, w.segment, w.slot, cta, barrier_idx);
        asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(f), "r"(1u) : "memory");
      }
      if (record != nullptr) record[2] = clock64();
      return;
    }
    // The tile's last part: add the earlier parts, in k order (slots in order), each once
    // its flag is up, then put the flag down for the next call (we are its only reader).
    for (int32_t g = w.firstSlot; g < w.slot; ++g) {
      if (rangeEmpty(p, w.segment, g)) continue;
      uint32_t* f = flag(p, w.segment, g, cta, barrier_idx);
      if (tid == 0) {
        uint32_t v = 0;
        for (uint64_t spins = 0;; ++spins) {
          asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(f) : "memory");
          if (v != 0) break;
          if (spins > kSpinLimit) __trap();
        }
      }
      cutlass::arch::NamedBarrier::arrive_and_wait(NumThreadsPerWarpGroup, barrier);
      Striped::load_add(*acc, reinterpret_cast<Array*>(partial(p, w.segment, g, cta, barrier_idx, kPerThread)), tid);
      cutlass::arch::NamedBarrier::arrive_and_wait(NumThreadsPerWarpGroup, barrier);
      if (tid == 0) *f = 0;
    }
    if (record != nullptr) {
      record[2] = clock64();
      record[3] |= uint64_t(w.slot - w.firstSlot) << 20;
    }
  }

 private:
  // Segment s: cluster rows [s R / S, (s + 1) R / S) of R, its iterations U = rows x
  // tilesN x kTiles; slot g's range [g U / G, (g + 1) U / G).
  CUTLASS_HOST_DEVICE static int32_t segmentFirstRow(Params const& p, int32_t s) {
    return int32_t(int64_t(s) * p.clusterRows / p.segments);
  }
  CUTLASS_HOST_DEVICE static int64_t segmentIterations(Params const& p, int32_t s) {
    return int64_t(segmentFirstRow(p, s + 1) - segmentFirstRow(p, s)) * p.tilesN * p.kTiles;
  }
  CUTLASS_HOST_DEVICE static int64_t rangeStart(Params const& p, int32_t s, int32_t g) {
    return segmentIterations(p, s) * g / p.slots;
  }
  CUTLASS_HOST_DEVICE static bool rangeEmpty(Params const& p, int32_t s, int32_t g) {
    return rangeStart(p, s, g) == rangeStart(p, s, g + 1);
  }
  CUTLASS_DEVICE int64_t rangeEnd(int32_t s, int32_t g) const { return rangeStart(params_, s, g + 1); }

  // The slot whose range holds iteration x of segment s (ranges ascend with the slot).
  CUTLASS_DEVICE static int32_t slotOf(Params const& p, int32_t s, int64_t x) {
    const int64_t U = segmentIterations(p, s);
    int32_t g = int32_t(x * p.slots / U);
    while (g + 1 < p.slots && rangeStart(p, s, g + 1) <= x) ++g;
    while (g > 0 && rangeStart(p, s, g) > x) --g;
    return g;
  }

  CUTLASS_DEVICE static float* partial(Params const& p, int32_t s, int32_t g, int cta, uint32_t group, int perThread) {
    const size_t tile = ((size_t(s) * p.slots + size_t(g)) * kClusterM + size_t(cta)) * size_t(p.tileElems);
    return p.partials + tile + size_t(group) * NumThreadsPerWarpGroup * size_t(perThread);
  }
  CUTLASS_DEVICE static unsigned long long* stamp(Params const& p, int32_t part) {
    return p.stamps + (size_t(blockIdx.x) * kMaxParts + size_t(part)) * kStampWords;
  }

  // The timeline's record of a part as the first consumer warp group's leader fetches it
  // (the producer warps fetch the same parts earlier; only the consumer's time counts).
  CUTLASS_DEVICE WorkTileInfo stamped(WorkTileInfo w) {
    w.part = parts_++;
    if (params_.stamps != nullptr && threadIdx.x == NumThreadsPerWarpGroup && w.part < kMaxParts) {
      unsigned long long* record = stamp(params_, w.part);
      record[0] = clock64();
      record[3] = w.is_valid() ? uint64_t(w.k_tile_count) | uint64_t(w.final) << 16 : ~0ull;
    }
    return w;
  }

  CUTLASS_DEVICE static uint32_t* flag(Params const& p, int32_t s, int32_t g, int cta, uint32_t group) {
    return p.flags + ((size_t(s) * p.slots + size_t(g)) * kClusterM + size_t(cta)) * 2 + group;
  }

  // The next part of this slot: the segments in order, each range from its end back.
  CUTLASS_DEVICE WorkTileInfo advance() {
    WorkTileInfo w;  // invalid: no k-blocks
    while (segment_ < params_.segments) {
      const int64_t start = rangeStart(params_, segment_, slot_);
      if (pos_ > start) {
        const int64_t kt = params_.kTiles, tile = (pos_ - 1) / kt;
        const int64_t first = tile * kt > start ? tile * kt : start;
        const int32_t row = segmentFirstRow(params_, segment_) + int32_t(tile / params_.tilesN);
        w.M_idx = row * kClusterM + cta_;
        w.N_idx = int32_t(tile % params_.tilesN);
        w.K_idx = int32_t(first - tile * kt);
        w.k_tile_count = uint32_t(pos_ - first);
        w.final = pos_ == (tile + 1) * kt;
        w.segment = segment_;
        w.slot = slot_;
        w.firstSlot = slotOf(params_, segment_, tile * kt);
        pos_ = first;
        return w;
      }
      ++segment_;
      if (segment_ < params_.segments) pos_ = rangeEnd(segment_, slot_);
    }
    return w;
  }

  Params params_;
  int32_t slot_ = 0, cta_ = 0, segment_ = 0, parts_ = 0;
  int64_t pos_ = 0;
};

template <class ArchTag, class TileShape, class ClusterShape, uint32_t SchedulerPipelineStageCount>
struct TileSchedulerSelector<fc::engine::probe::ShardStreamKTag, ArchTag, TileShape, ClusterShape,
                             SchedulerPipelineStageCount> {
  using Scheduler = ShardStreamKScheduler;
};

}  // namespace cutlass::gemm::kernel::detail
