// The shared-memory pipelines behind the GEMM + reduce-scatter engine's dynamic tile
// scheduler (scatter_scheduler.cuh), in the form CUTLASS's sm90 warp-specialized
// kernels drive a dynamic persistent scheduler (their IsDynamicPersistent hooks, used
// upstream by the sm100 cluster-launch-control scheduler): a scheduler warp produces
// the cluster's next tile into a ring of stages, every role of every CTA of the
// cluster consumes it, and the mainloop producer throttles the scheduler warp to one
// tile ahead of the tiles it loads.
//
// TicketPipeline: the ring. Only CTA 0 of a cluster produces (its scheduler warp
// draws a ticket and writes the tile into every CTA's slot: the CTAs of a cluster
// share B tiles by multicast, so they must work on the same tile). Each CTA's slot of
// a stage has a full barrier there, completed by CTA 0's arrive (expecting the bytes)
// and the bytes' own st.async (mbarrier::complete_tx): the slot's value is visible to
// whoever sees the phase complete. A stage is free again once every consumer warp
// of every CTA has read it: one empty barrier per stage in CTA 0, one arrival per warp
// (the kernels count threads, per CTA: their count / 32 times the cluster's CTAs),
// arrived at remotely from the other CTAs. CTA 0 waits for the
// last stages' releases before it exits (producer_tail), so that no remote arrival
// finds it gone; the other CTAs consume every stage CTA 0 writes to them before
// they exit, so no write finds them gone either.
//
// LeaderThrottle: the throttle. CTA 0's mainloop producer warp arrives once per tile
// it starts loading, and CTA 0's scheduler warp draws the next ticket only after
// such an arrival: a cluster holds one tile beyond those it works on, so that tiles
// are not reserved early by a cluster that is slow to reach them. CTA-local, and a
// no-op in the other CTAs (their mainloop runs in step with CTA 0's: they share the
// B tiles).
#pragma once

#include <cute/arch/cluster_sm90.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/cutlass.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include <cstdint>

namespace fc::engine {

// The CTAs in this CTA's cluster, and whether this is its CTA 0.
CUTLASS_DEVICE uint32_t clusterCtas() {
  const dim3 cs = cute::cluster_shape();
  return cs.x * cs.y * cs.z;
}
CUTLASS_DEVICE bool clusterLeader() { return cute::block_rank_in_cluster() == 0; }

// What CUTLASS's kernels name on a scheduler pipeline type, besides its Params.
template <int kStages>
struct PipelineNames {
  static constexpr uint32_t Stages = kStages;
  using PipelineState = cutlass::PipelineState<kStages>;
  enum class ThreadCategory { NonParticipant, Producer, Consumer, ProducerConsumer };
};

template <int kStages>
class TicketPipeline : public PipelineNames<kStages> {
 public:
  using typename PipelineNames<kStages>::PipelineState;
  using typename PipelineNames<kStages>::ThreadCategory;
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  struct Params {  // the fields CUTLASS's sm90 kernels set (see above for their use)
    uint32_t transaction_bytes = 0;
    ThreadCategory role = ThreadCategory::NonParticipant;
    uint32_t producer_blockid = 0;
    uint32_t producer_arv_count = 0;
    uint32_t consumer_arv_count = 0;  // per CTA
    int initializing_warp = 0;
  };
  struct SharedStorage {
    uint64_t full[kStages];
    uint64_t empty[kStages];  // used in CTA 0 only
  };

  CUTLASS_DEVICE TicketPipeline(SharedStorage& storage, Params const& params)
      : storage_(&storage), leader_(clusterLeader()) {
    if (cutlass::canonical_warp_idx_sync() == params.initializing_warp && cute::elect_one_sync()) {
      for (int s = 0; s < kStages; ++s) {
        Barrier::init(&storage.full[s], 1);
        Barrier::init(&storage.empty[s], params.consumer_arv_count / 32 * clusterCtas());
      }
    }
    cutlass::arch::fence_barrier_init();
  }
  // Over barriers another object initialised.
  CUTLASS_DEVICE explicit TicketPipeline(SharedStorage& storage) : storage_(&storage), leader_(clusterLeader()) {}

  // Producer (the scheduler warp, all lanes): in CTA 0, wait until the stage is free;
  // then publish (scatter_scheduler.cuh) writes it. Nothing in the other CTAs.
  CUTLASS_DEVICE void producer_acquire(PipelineState state) {
    if (leader_) Barrier::wait(&storage_->empty[state.index()], state.phase());
  }
  // Lane c < the cluster's CTAs: CTA c's slot `slot` of this stage gets `value`.
  CUTLASS_DEVICE void publish(PipelineState state, uint32_t* slot, uint32_t value) {
    const uint32_t lane = cutlass::canonical_lane_idx();
    if (!leader_ || lane >= clusterCtas()) return;
    uint64_t* full = &storage_->full[state.index()];
    Barrier::arrive_and_expect_tx(full, sizeof(uint32_t), lane, 1u);
    cute::store_shared_remote(value, cute::cast_smem_ptr_to_uint(slot), cute::cast_smem_ptr_to_uint(full), lane);
  }
  CUTLASS_DEVICE void producer_commit(PipelineState) {}  // publish completes the stage
  CUTLASS_DEVICE void producer_tail(PipelineState state) {
    if (!leader_) return;
    for (int s = 0; s < kStages; ++s, ++state) Barrier::wait(&storage_->empty[state.index()], state.phase());
  }

  // Consumers (every thread the kernel counts, in whole warps): wait for the stage,
  // read it, release it. One arrival per warp, not per thread as the kernel counts
  // them: each is a remote arrive on CTA 0's barrier from the other CTAs, 320 per tile
  // from the cooperative kernel's consumers otherwise (the interrupted session that
  // wrote this measured those at 5-14 % of the kernel's time on one H100; not
  // repeated).
  CUTLASS_DEVICE void consumer_wait(PipelineState state) { Barrier::wait(&storage_->full[state.index()], state.phase()); }
  CUTLASS_DEVICE void consumer_release(PipelineState state) {
    __syncwarp();  // the whole warp has read the stage
    Barrier::arrive(&storage_->empty[state.index()], 0u, cutlass::canonical_lane_idx() == 0);  // CTA 0's
  }

 private:
  SharedStorage* storage_;
  bool leader_;
};

template <int kStages>
class LeaderThrottle : public PipelineNames<kStages> {
 public:
  using typename PipelineNames<kStages>::PipelineState;
  using typename PipelineNames<kStages>::ThreadCategory;
  using Barrier = cutlass::arch::ClusterBarrier;
  struct Params {
    ThreadCategory role = ThreadCategory::NonParticipant;
    uint32_t producer_arv_count = 1;  // CTA 0's mainloop producer warp
    uint32_t consumer_arv_count = 1;  // CTA 0's scheduler warp
    uint32_t dst_blockid = 0;         // (CTA-local here)
    int initializing_warp = 0;
  };
  struct SharedStorage {
    uint64_t full[kStages];
    uint64_t empty[kStages];
  };

  CUTLASS_DEVICE LeaderThrottle(SharedStorage& storage, Params const& params)
      : storage_(&storage), leader_(clusterLeader()) {
    if (cutlass::canonical_warp_idx_sync() == params.initializing_warp && cute::elect_one_sync()) {
      for (int s = 0; s < kStages; ++s) {
        Barrier::init(&storage.full[s], params.producer_arv_count);
        Barrier::init(&storage.empty[s], params.consumer_arv_count);
      }
    }
    cutlass::arch::fence_barrier_init();
  }

  CUTLASS_DEVICE void producer_acquire(PipelineState state) {
    if (leader_) Barrier::wait(&storage_->empty[state.index()], state.phase());
  }
  CUTLASS_DEVICE void producer_commit(PipelineState state) {
    if (leader_) Barrier::arrive(&storage_->full[state.index()]);
  }
  CUTLASS_DEVICE void consumer_wait(PipelineState state) {
    if (leader_) Barrier::wait(&storage_->full[state.index()], state.phase());
  }
  CUTLASS_DEVICE void consumer_release(PipelineState state) {
    if (leader_) Barrier::arrive(&storage_->empty[state.index()]);
  }

 private:
  SharedStorage* storage_;
  bool leader_;
};

}  // namespace fc::engine
