// The GEMM + reduce-scatter engine's epilogue: CUTLASS's sm90 TMA warp-specialized
// epilogue (it stores each output tile with TMA, as always), followed by a signal
// once the tiles' stores have landed: a release add, at system scope, of the number of
// tiles stored to the counter of the rank that owns their rows (its block) and of the
// piece of the block they lie in, in that rank's memory. That rank's copy queue pulls
// a piece once a gate kernel has seen its counter reach the piece's tiles
// (fused/tile_gate.cu, fused/matmul_reduce_scatter.cc).
// Tiles the scheduler adds past the problem (rows or columns rounded up to whole
// clusters or swizzle bands) count nothing, so that the count is exact; nor do the
// tiles of our own block, which nobody waits for.
//
// Why after the stores have *landed*: the TMA store pipeline only waits for its
// stores to have read shared memory (cp.async.bulk.wait_group.read), so the signal
// first waits for the bulk stores to complete (cp.async.bulk.wait_group 0, by the warp
// that issued them), orders them before generic-proxy accesses
// (fence.proxy.async.global), and then releases at system scope: a peer's copy engine
// reads the tiles next.
//
// When: a warp group counts the tiles it stores for one (owner, piece) and signals them
// all at once, when its next tile belongs to another piece (at that tile's store,
// after its whole mainloop: the earlier stores have long landed, the wait costs
// nothing) or when the kernel ends (the epilogue's destructor, after the last store).
// The gate waits for all of a piece's tiles, so one signal per run of tiles loses
// nothing, and a warp group releases a few times per call instead of once per tile (a store round trip and
// a system-scope fence in the consumer warp groups each). Measured on one H200
// (docs/perf-log.md): per tile, deferred or batched, the kernel's time stays within
// noise; the signals cost 1-3.5 % of it at K = 1024-1280. The scheduler computes the
// blocks other ranks own first, ours last, so every CTA signals a peer's block as it
// moves on to the next one.
//
// Except when our own tiles' epilogue waits for the peer's partial (the epilogue add,
// own_block_epilogue.cuh): then every tile is signalled as soon as it is stored
// (signal.eachTile). A batch left pending could otherwise wait behind that wait: in
// the ping-pong kernel a warp group's store begins only after the other warp group's
// epilogue has ended (their order barrier), so a group's last batch of peer tiles,
// due at its next store, waited behind the other group's own tile, which waited for
// the peer's partial, whose last batch waited the same way on the peer behind ours:
// a cycle across ranks that only the deadline broke (engine-pair, one H100, the
// same shape in two runs).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>

#include <utility>

#include "device/pdl.cuh"
#include "gemm/engine/engine.h"

namespace fc::engine {

template <class Base>
class TileSignalEpilogue : public Base {
 public:
  struct Arguments : Base::Arguments {
    TileSignal signal;
  };
  struct Params : Base::Params {
    TileSignal signal;
  };

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args,
                                                  void* workspace) {
    Params p;
    static_cast<typename Base::Params&>(p) = Base::to_underlying_arguments(problem_shape, args, workspace);
    p.signal = args.signal;
    return p;
  }

  CUTLASS_HOST_DEVICE TileSignalEpilogue(Params const& params, typename Base::TensorStorage& shared_tensors)
      : Base(params, shared_tensors), signal_(params.signal) {}

  // The kernel's work loops run the destructor once per thread, after the last tile.
  CUTLASS_DEVICE ~TileSignalEpilogue() { signalPending(); }

  // The stock store of one tile, after the signal of the tiles before it when they
  // belong to another owner. Arguments as CUTLASS's kernels pass them: ..., problem
  // shape (4), tile shape (5), tile coordinate (6), ..., thread index among the
  // epilogue threads (9: within its warp group in the ping-pong kernel), ...
  template <class... Args>
  CUTLASS_DEVICE auto store(Args&&... args) {
    auto tuple = std::forward_as_tuple(args...);
    const auto problem = std::get<4>(tuple);
    const auto tileShape = std::get<5>(tuple);
    const auto tileCoord = std::get<6>(tuple);
    thread_ = std::get<9>(tuple);
    // Rows past M (whole clusters) or a column of tiles past N (swizzle bands round the
    // columns up): nothing stored, nothing to count.
    const int64_t row = int64_t(cute::get<0>(tileCoord)) * int64_t(cute::size<0>(tileShape));
    const bool stored = row < int64_t(cute::get<0>(problem)) &&
                        int64_t(cute::get<1>(tileCoord)) * int64_t(cute::size<1>(tileShape)) <
                            int64_t(cute::get<1>(problem));
    // PDL behind the entry barrier: nothing reaches a peer before the barrier's grid has
    // ended, i.e. before every peer has reached the call (its workspace free to write).
    // Once per thread; the mainloops before it ran under the barrier.
    if (signal_.afterPreviousGrid && !waited_) {
      fc::dev::waitForPreviousGrid();
      waited_ = true;
    }
    const int owner = stored && signal_.blockRows > 0 ? int(row / signal_.blockRows) : -1;
    const int piece = owner >= 0 ? int((row - owner * signal_.blockRows) / signal_.pieceRows) : -1;
    if (owner != pendingOwner_ || piece != pendingPiece_) signalPending();
    auto next = Base::store(std::forward<Args>(args)...);
    if (owner >= 0 && owner != signal_.self) {
      pendingOwner_ = owner;
      pendingPiece_ = piece;
      ++pendingTiles_;
      if (signal_.eachTile) signalPending();
    }
    return next;
  }

 private:
  // Warp 0 of the epilogue threads (of each consumer warp group, ping-pong) issued the
  // pending tiles' TMA stores (the stock epilogue's rule: all its lanes, each
  // committing its own bulk groups); every lane waits for its own, then lane 0 adds
  // the tiles to the owner's counter.
  CUTLASS_DEVICE void signalPending() {
    if (pendingTiles_ == 0 || signal_.counters == nullptr || thread_ / 32 != 0) return;
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");
    __syncwarp();
    if (thread_ == 0) {
      uint32_t* counter =
          reinterpret_cast<uint32_t*>(signal_.counters + size_t(pendingOwner_) * signal_.stride) + pendingPiece_;
      asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(counter), "r"(pendingTiles_) : "memory");
    }
    pendingTiles_ = 0;
    pendingOwner_ = -1;
    pendingPiece_ = -1;
  }

  TileSignal signal_;
  int pendingOwner_ = -1;      // the owner of the tiles stored and not yet signalled
  int pendingPiece_ = -1;      // and the piece of its block they lie in
  uint32_t pendingTiles_ = 0;  // how many
  int thread_ = 0;             // this thread's index among the epilogue threads
  bool waited_ = false;        // for the grid before (afterPreviousGrid)
};

}  // namespace fc::engine
