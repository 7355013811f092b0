// The GEMM + reduce-scatter engine's epilogue: CUTLASS's sm90 TMA warp-specialized
// epilogue (it stores each output tile with TMA, as always), followed by a signal
// once the tile's stores have landed: a release add of 1, at system scope, to the
// counter of the rank that owns the tile's rows (its block), in that rank's memory.
// That rank's copy queue waits for its counter to reach the tiles of its block
// (cuStreamWaitValue32) before it pulls the block (fused/matmul_reduce_scatter.cc).
//
// Why after the stores have *landed*: the TMA store pipeline only waits for its
// stores to have read shared memory (cp.async.bulk.wait_group.read), so the signal
// first waits for the bulk stores to complete (cp.async.bulk.wait_group 0, by the warp
// that issued them), orders them before generic-proxy accesses
// (fence.proxy.async.global), and then releases at system scope: a peer's copy engine
// reads the tile next. The cost is one store round trip per tile in the epilogue warp
// group, which otherwise overlaps the next tile's first stores with this one's.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>

#include <utility>

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

  // The stock store of one tile, then its signal. Arguments as CUTLASS's kernels pass
  // them: ..., problem shape (4), tile shape (5), tile coordinate (6), ..., thread
  // index among the epilogue threads (9), ...
  template <class... Args>
  CUTLASS_DEVICE auto store(Args&&... args) {
    auto tuple = std::forward_as_tuple(args...);
    const auto tileCoord = std::get<6>(tuple);
    const int threadIdx = std::get<9>(tuple);
    auto next = Base::store(std::forward<Args>(args)...);
    signalTile(int64_t(cute::get<0>(tileCoord)), threadIdx);
    return next;
  }

 private:
  // Warp 0 of the epilogue threads issued the tile's TMA stores (the stock epilogue's
  // rule); it waits for them, then one lane releases the owner's counter.
  CUTLASS_DEVICE void signalTile(int64_t tileRow, int thread) const {
    if (signal_.counters == nullptr || thread / 32 != 0) return;
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");
    __syncwarp();
    if (thread == 0) {
      const int64_t row = tileRow * signal_.blockM;
      if (row >= signal_.M) return;  // a padded tile row: no rows, no signal
      const int owner = int(row / signal_.blockRows);
      uint32_t* counter = reinterpret_cast<uint32_t*>(signal_.counters + size_t(owner) * signal_.stride);
      asm volatile("red.release.sys.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
    }
  }

  TileSignal signal_;
};

}  // namespace fc::engine
