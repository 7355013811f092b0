// The GEMM + reduce-scatter engine's epilogue: CUTLASS's sm90 TMA warp-specialized
// epilogue (it stores each output tile with TMA, as always), followed by a signal
// once the tile's stores have landed: a release add of 1, at system scope, to the
// counter of the rank that owns the tile's rows (its block), in that rank's memory.
// That rank's copy queue pulls the block once a gate kernel has seen the counter reach
// the block's tiles (fused/tile_gate.cu, fused/matmul_reduce_scatter.cc). Tiles the
// scheduler adds past the problem (rows or columns rounded up to whole clusters or
// swizzle bands) signal nothing, so that the count is exact.
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
    const auto problem = std::get<4>(tuple);
    const auto tileShape = std::get<5>(tuple);
    const auto tileCoord = std::get<6>(tuple);
    const int thread = std::get<9>(tuple);
    auto next = Base::store(std::forward<Args>(args)...);
    // A column of tiles past N (swizzle bands round the columns up): nothing stored.
    const bool inN = int64_t(cute::get<1>(tileCoord)) * int64_t(cute::size<1>(tileShape)) <
                     int64_t(cute::get<1>(problem));
    if (inN) signalTile(int64_t(cute::get<0>(tileCoord)), thread);
    return next;
  }

 private:
  // Warp 0 of the epilogue threads issued the tile's TMA stores (the stock epilogue's
  // rule: all its lanes, each committing its own bulk groups); every lane waits for its
  // own, then lane 0 releases the owner's counter.
  CUTLASS_DEVICE void signalTile(int64_t tileRow, int thread) const {
    if (signal_.counters == nullptr || thread / 32 != 0) return;
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");
    __syncwarp();
    if (thread == 0) {
      const int64_t row = tileRow * signal_.blockM;
      if (row >= signal_.M) return;  // a tile row past M (whole clusters): nothing stored
      const int owner = int(row / signal_.blockRows);
      uint32_t* counter = reinterpret_cast<uint32_t*>(signal_.counters + size_t(owner) * signal_.stride);
      asm volatile("red.release.sys.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
    }
  }

  TileSignal signal_;
};

}  // namespace fc::engine
