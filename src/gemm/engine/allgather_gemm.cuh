// The compute of the all-gather + GEMM engine: a stock CUTLASS sm90 TMA + WGMMA
// warp-specialized cooperative persistent GEMM (CollectiveBuilder mainloop and
// epilogue), with our tile scheduler (readiness_scheduler.cuh) as its schedule.
// One instantiation per (element type, B layout), each in its own translation unit.
//
// Configurations: 128 x 256 x 64 tiles, 2 x 1 clusters (the B tile is multicast to
// both CTAs of a cluster, which work on neighbouring rows of A), stages as many as
// shared memory holds after the epilogue's - PyTorch's async-input GEMM's choice -
// and 128 x 128 x 64 ping-pong where those need fewer waves of the GPU or K is short
// (engine.cc); for the all-gather engine also 128 x 224, 128 x 192 and 128 x 160
// cooperative and 128 x 96 ping-pong (tuning::engineTileN). Measured on one H200 against
// 256 x 128 (1 x 2 and 2 x 1 clusters), 128 x 256 / 1 x 1 and 2 x 2, cooperative 128 x 128
// and ping-pong 128 x 112 (docs/perf-log.md).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include <cstdint>
#include <mutex>
#include <type_traits>

#include "core/preload.h"
#include "core/result.h"
#include "tuning/tuning.h"
#include "gemm/engine/readiness_scheduler.cuh"
#include "gemm/engine/engine.h"
#include "gemm/engine/own_block_epilogue.cuh"
#include "gemm/engine/own_rows_mainloop.cuh"
#include "gemm/engine/scatter_scheduler.cuh"
#include "gemm/engine/tile_signal_epilogue.cuh"

namespace fc::engine {

// Tile and cluster shapes of an instantiation (tile M, N, K; cluster M, N) and its
// kernel schedule: cooperative (both consumer warp groups on one tile) or ping-pong
// (each consumer warp group on its own tile, their mainloops and epilogues
// alternating). The epilogue's subtile: CUTLASS's choice (EpilogueTileAuto: 32 columns
// where the width allows, gcd(32, TN) else: 16 at TN 112, which stores in 32-byte rows)
// or the one given.
template <int TM, int TN, int TK, int CM, int CN, bool kPingpong = false,
          typename EpilogueTileT = cutlass::epilogue::collective::EpilogueTileAuto>
struct EngineConfig {
#if !defined(CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED)
  // Widths: below ("The widths").
  static_assert(TN % 64 == 0 || TN == 96, "a width outside 64 / 96 / 128 / 192 / 256 needs CuTe's extended wgmma shapes");
#endif
  static constexpr bool kPingpongSchedule = kPingpong;
  using EpilogueTile = EpilogueTileT;
  using TileShape = cute::Shape<cute::Int<TM>, cute::Int<TN>, cute::Int<TK>>;
  using ClusterShape = cute::Shape<cute::Int<CM>, cute::Int<CN>, cute::_1>;
  using MainloopSchedule = std::conditional_t<kPingpong, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                                              cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
  using EpilogueSchedule = std::conditional_t<kPingpong, cutlass::epilogue::TmaWarpSpecialized,
                                              cutlass::epilogue::TmaWarpSpecializedCooperative>;
};
using Config128x256c2x1 = EngineConfig<128, 256, 64, 2, 1>;
using Config128x128c2x1 = EngineConfig<128, 128, 64, 2, 1>;
using Config128x128c2x1Pingpong = EngineConfig<128, 128, 64, 2, 1, true>;
// The widths. The all-gather engine's other widths, for products whose 128- and 256-wide
// tiles leave much of a wave idle (tuning::engineTileN): 128 x 96 ping-pong (512 x 3072 is
// 96 tiles of 128 x 128 on 132 SMs, 128 of 128 x 96), 128 x 192 cooperative (1024 x 3072:
// 128 tiles, one wave), and for the N with a factor 7 or 5 (3584, 7168, 14336; 2560, 5120,
// 10240) 128 x 224 (1024 x 3584: 128 tiles) and 128 x 160 cooperative (1024 x 5120: 256
// tiles, 1.94 waves). CuTe's MMA selector takes the largest wgmma N that divides the tile
// among 256, 192, 128, 96, 64, 32, 16, 8 unless CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED is
// defined (cute/arch/mma_sm90.hpp), when every multiple of 8 counts: without it a 224-wide
// tile runs 64 x 32 instructions and a 112-wide one 64 x 16 (why 128 x 112 took twice the
// 128-wide tiles' time in the forty-first session). The 160- and 224-wide units define it
// before any include; the others do not need it (no multiple of 8 between their width and
// 256 divides it), and the assertion in EngineConfig keeps a new width from going without.
// (perf-log, forty-eighth session: gemm-configs over 73 shapes.)
using Config128x96c2x1Pingpong = EngineConfig<128, 96, 64, 2, 1, true>;
using Config128x192c2x1 = EngineConfig<128, 192, 64, 2, 1>;
using Config128x224c2x1 = EngineConfig<128, 224, 64, 2, 1>;
using Config128x160c2x1 = EngineConfig<128, 160, 64, 2, 1>;

// The epilogue: all-gather + GEMM's, D = A x op(B) (stock, no C); GEMM +
// reduce-scatter's (kSignal), each tile signalling its owner once stored
// (tile_signal_epilogue.cuh) and our own block adding the peer's partial
// (own_block_epilogue.cuh), with 16 KiB of shared memory for C; GEMM + all-reduce's
// (kGather), that one whose own block's sums also go to the peer (GatherFusionOf);
// GEMM + reduce-scatter's at 3-8 ranks (kChain), the chain of fp32 running sums
// (ChainFusionOf, own_block_epilogue.cuh).
template <typename Element, typename Config, bool kSignal, bool kGather = false, bool kChain = false>
struct EngineEpilogue {
  using LayoutD = cutlass::layout::RowMajor;  // [M, N]
  static constexpr int kAlign = 16 / sizeof(Element);
  using Stock = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename Config::TileShape, typename Config::ClusterShape,
      typename Config::EpilogueTile, float, float,
      void, LayoutD, kAlign,  // no C: D = A x op(B)
      Element, LayoutD, kAlign, typename Config::EpilogueSchedule>::CollectiveOp;
  using type = Stock;
};
template <typename Element, typename Config, bool kGather>
struct EngineEpilogue<Element, Config, true, kGather, false> {
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlign = 16 / sizeof(Element);
  using Gather = GatherFusionOf<Element, typename Config::TileShape, typename Config::EpilogueSchedule>;
  using Fusion = std::conditional_t<kGather, typename Gather::type, ScatterFusion<Element>>;
  using Built = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename Config::TileShape, typename Config::ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, Element, LayoutD, kAlign, Element, LayoutD,
      kAlign, typename Config::EpilogueSchedule, Fusion>::CollectiveOp;
  static constexpr int kStagesC = int(16384 / (cute::size(typename Built::EpilogueTile{}) * sizeof(Element)));
  using Stock = typename WithOwnSmemC<Built, kStagesC>::type;
  using type = TileSignalEpilogue<OwnBlockEpilogue<Stock>>;
};
// The chain: C and D fp32 (the running sums, 4 elements per 16 bytes), the output by the
// fusion's auxiliary store; C's shared memory 16 KiB as above.
template <typename Element, typename Config>
struct EngineEpilogue<Element, Config, true, false, true> {
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlign = 16 / sizeof(float);
  using Chain = ChainFusionOf<Element, typename Config::TileShape, typename Config::EpilogueSchedule>;
  using Built = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename Config::TileShape, typename Config::ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, float, LayoutD, kAlign, float, LayoutD, kAlign,
      typename Config::EpilogueSchedule, typename Chain::type>::CollectiveOp;
  static constexpr int kStagesC = int(16384 / (cute::size(typename Built::EpilogueTile{}) * sizeof(float)));
  using Stock = typename WithOwnSmemC<Built, kStagesC>::type;
  using type = TileSignalEpilogue<OwnBlockEpilogue<Stock, true>>;
};

// SchedulerTag: ours (ReadinessSchedulerTag; ScatterSchedulerTag, tiles handed out
// dynamically, for GEMM + reduce-scatter), or CUTLASS's stock persistent scheduler
// (cutlass::gemm::PersistentScheduler; the GEMM-alone probe compares them).
// kSignal: GEMM + reduce-scatter's epilogue (EngineEpilogue); kGather: with the store
// of our block's sums into the peer (GEMM + all-reduce; g.source.gather required);
// kChain: the 3-8-rank chain of running sums (g.chain required).
template <typename Element, bool kTransB, typename Config = Config128x256c2x1,
          typename SchedulerTag = ReadinessSchedulerTag, bool kSignal = false, bool kGather = false,
          bool kChain = false>
struct EngineGemmKernel {
  static_assert(kSignal || !kGather, "the gather rides in GEMM + reduce-scatter's epilogue");
  static_assert(kSignal || !kChain, "the chain is GEMM + reduce-scatter's epilogue");
  static_assert(!(kGather && kChain), "the chain has no gather");
  using LayoutA = cutlass::layout::RowMajor;  // [M, K]
  // CUTLASS sees B as K x N: [N, K] row-major (fcOpT) is its column-major (K-major).
  using LayoutB = std::conditional_t<kTransB, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  using LayoutD = cutlass::layout::RowMajor;  // [M, N]
  static constexpr int kAlign = 16 / sizeof(Element);
  using TileShape = typename Config::TileShape;
  using ClusterShape = typename Config::ClusterShape;
  static_assert(cute::size<2>(TileShape{}) == kEngineTileK, "pieces of K columns are whole k-blocks");

  using StockEpilogue = typename EngineEpilogue<Element, Config, kSignal, kGather, kChain>::Stock;
  using Epilogue = typename EngineEpilogue<Element, Config, kSignal, kGather, kChain>::type;

  using StockMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, kAlign, Element, LayoutB, kAlign, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      typename Config::MainloopSchedule>::CollectiveOp;
  // All-gather + GEMM reads its own shard's rows in place (g.ownA): own_rows_mainloop.cuh.
  using Mainloop = OwnRowsMainloop<StockMainloop>;

  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue, SchedulerTag>;
  static constexpr bool kDynamic = std::is_same_v<SchedulerTag, ScatterSchedulerTag<true>> ||
                                   std::is_same_v<SchedulerTag, ScatterSchedulerTag<false>>;
  static constexpr bool kOurScheduler = kDynamic || std::is_same_v<SchedulerTag, ReadinessSchedulerTag>;
  static_assert(!kDynamic || std::is_same_v<SchedulerTag, ScatterSchedulerTag<Config::kPingpongSchedule>>,
                "the dynamic scheduler's tag names the kernel schedule (where the first tile is drawn)");
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  // Loaded with every communicator, not at its first launch (core/preload.h).
  static inline const bool kPreloaded =
      registerKernelModule(reinterpret_cast<const void*>(cutlass::device_kernel<Kernel>));

  static fcResult_t run(const EngineGemm& g, cudaStream_t stream) {
    (void)kPreloaded;  // instantiates the registration in each unit that runs this kernel
    const int M = int(g.M), N = int(g.N), K = int(g.K);
    auto strideA = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(M, K, 1));
    auto strideB = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(N, K, 1));
    auto strideD = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(M, N, 1));
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;  // only read with sm_count = 0
    hw.sm_count = g.smCount;
    typename Kernel::TileSchedulerArguments sched;
    if constexpr (kOurScheduler) sched.ready = g.ready;
    if constexpr (kDynamic) {
      if (g.tileTicket == nullptr) return setError(fcInternalError, "the GEMM engine's tile ticket is missing");
      sched.ticket = g.tileTicket;
      // Interleaved: 2 ranks adding the peer's partial in the epilogue (not the chain).
      if (g.lead > 0 && g.source.C != nullptr && !g.chain) {
        sched.lead = uint32_t(g.lead);
        sched.blockRows = g.signal.blockRows;
        sched.pieceRows = g.signal.pieceRows;
      }
    }
    // Where B is well beyond L2, raster along N in bands of clusters of tile rows
    // (CUTLASS's swizzle), so that each B tile is read by a band's rows while in L2:
    // tuning::engineBands says how wide.
    constexpr size_t kClusterRows = size_t(cute::size<0>(TileShape{}) * cute::size<0>(ClusterShape{}));
    const int bands =
        tuning::engineBands(g.M, g.N, g.K, size_t(g.ready.shardRows), cute::size<1>(TileShape{}), kClusterRows);
    sched.max_swizzle_size = g.swizzle > 0 ? g.swizzle : bands;
    // The epilogue add needs each CTA's own-block tiles after all its others (a band
    // across the block boundary would put a peer's tile behind a wait for that peer):
    // no bands then.
    if constexpr (kSignal)
      if (g.source.C != nullptr) sched.max_swizzle_size = 1;
    typename Epilogue::Arguments epilogue{};
    if constexpr (kSignal) {
      if (kGather != (g.source.gather != nullptr) || (kGather && g.source.C == nullptr) || kChain != g.chain ||
          (kChain && g.source.C == nullptr))
        return setError(fcInternalError, "the GEMM engine's gather store or chain and its kernel do not match");
      // beta as scatterFusionArguments; gather: where the fusion's second store goes
      // (its tile coordinates' rows, as D's), NULL: nowhere.
      auto fusion = [&](float beta, Element* gather) {
        if constexpr (kGather) {
          typename EngineEpilogue<Element, Config, true, true>::Gather::Stride strideGather{};
          strideGather = strideD;
          return EngineEpilogue<Element, Config, true, true>::Gather::arguments(beta, gather, strideGather);
        } else {
          (void)gather;
          return scatterFusionArguments<Element>(beta);
        }
      };
      // Every tile but our block's: its partial into g.D, C never read (beta 0; its
      // descriptor over D, a valid address), no second store.
      if constexpr (!kChain)
        static_cast<typename StockEpilogue::Arguments&>(epilogue) = {fusion(0.f, nullptr),
                                                                     static_cast<const Element*>(g.D), strideD,
                                                                     static_cast<Element*>(g.D), strideD};
      epilogue.signal = g.signal;
      epilogue.signal.eachTile = g.source.C != nullptr;  // see tile_signal_epilogue.cuh
      epilogue.signal.afterPreviousGrid = g.pdl;
      epilogue.dc = g.ready.dc;
      epilogue.channel = g.ready.channel;
      epilogue.source = g.source;
      if constexpr (kChain) {
        // The chain (3-8 ranks): every tile's fp32 running sum into our workspace g.D
        // ([M, N] at the product's rows), step 1 adding nothing (C over D, never read),
        // steps 2..W-1 and our block adding the next rank's running sum (g.source.C, the
        // same layout in its workspace); our block's tiles also store the rounded sum
        // into the output (g.source.D: the block's rows, its base shifted back by
        // firstRow rows as above; NULL: no such store, the caller rounds the fp32 sums).
        (void)fusion;
        using Chain = typename EngineEpilogue<Element, Config, true, false, true>::Chain;
        typename Chain::Stride strideOut{};
        strideOut = strideD;
        [[maybe_unused]] float* sums = static_cast<float*>(g.D);
        [[maybe_unused]] const float* next = static_cast<const float*>(g.source.C);
        [[maybe_unused]] Element* out =
            g.source.D == nullptr ? nullptr
                                  : reinterpret_cast<Element*>(reinterpret_cast<uintptr_t>(g.source.D) -
                                                               uintptr_t(g.source.firstRow) * g.N * sizeof(Element));
        static_cast<typename StockEpilogue::Arguments&>(epilogue) = {Chain::arguments(0.f, nullptr, strideOut), sums,
                                                                     strideD, sums, strideD};
        epilogue.mid = {Chain::arguments(1.f, nullptr, strideOut), next, strideD, sums, strideD};
        epilogue.own = {Chain::arguments(1.f, out, strideOut), next, strideD, sums, strideD};
        epilogue.ownLocal = epilogue.own;
      } else if (g.source.C != nullptr) {
        // Our block's tiles: C (the peer's partial) and D (the output) hold only the
        // block's rows: bases shifted back by firstRow rows (integers: outside the
        // buffers), so that the tiles' own coordinates land on them.
        const uintptr_t shift = uintptr_t(g.source.firstRow) * g.N * sizeof(Element);
        // The peer's copy of the sums (kGather), shifted the same way.
        Element* gather = g.source.gather == nullptr
                              ? nullptr
                              : reinterpret_cast<Element*>(reinterpret_cast<uintptr_t>(g.source.gather) - shift);
        epilogue.own = {fusion(1.f, gather),
                        reinterpret_cast<const Element*>(reinterpret_cast<uintptr_t>(g.source.C) - shift), strideD,
                        reinterpret_cast<Element*>(reinterpret_cast<uintptr_t>(g.source.D) - shift), strideD};
        // The same without the store into the peer (g.source.gatherMet: the entry barrier
        // did not meet the peers cleanly).
        epilogue.ownLocal = epilogue.own;
        static_cast<typename StockEpilogue::Arguments&>(epilogue.ownLocal).thread = fusion(1.f, nullptr);
      }
    } else {
      epilogue = {{1.f, 0.f}, nullptr, strideD, static_cast<Element*>(g.D), strideD};
    }
    typename Mainloop::Arguments mainloop{};
    static_cast<typename StockMainloop::Arguments&>(mainloop) = {static_cast<const Element*>(g.A), strideA,
                                                                 static_cast<const Element*>(g.B), strideB};
    if (g.ownA != nullptr) {
      mainloop.ptr_A_own = static_cast<const Element*>(g.ownA);
      mainloop.own_first_row = g.ready.firstRow;
      mainloop.own_rows = g.ready.shardRows;
    }
    mainloop.ready = g.ready;  // its waits per piece of K columns, where kPieceCols > 0
    if (g.storeA != nullptr) {  // Agathered from the stages
      mainloop.ptr_A_store = static_cast<Element*>(g.storeA);
      mainloop.store_own = g.storeOwnA;
    }
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                  {M, N, K, 1},
                                  mainloop,
                                  epilogue,
                                  hw,
                                  sched};
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess)
      return setError(fcNotSupported, "the GEMM engine cannot run M, N, K = %d, %d, %d", M, N, K);
    // Shared memory beyond 48 KiB must be allowed once per kernel and device (a process
    // may drive several GPUs: fcCommInitAll), outside any capture.
    static std::mutex smemMutex;
    static uint64_t smemDone = 0;  // bit d: set on device d
    int device = 0;
    cudaError_t smemErr = cudaGetDevice(&device);
    if (smemErr == cudaSuccess) {
      std::lock_guard<std::mutex> lock(smemMutex);
      const uint64_t bit = device < 64 ? uint64_t(1) << device : 0;
      if ((smemDone & bit) == 0 || bit == 0) {
        smemErr = cudaFuncSetAttribute(cutlass::device_kernel<Kernel>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       int(Kernel::SharedStorageSize));
        if (smemErr == cudaSuccess) smemDone |= bit;
      }
    }
    if (smemErr != cudaSuccess)
      return setError(fcUnhandledCudaError, "the GEMM engine's shared memory (%d bytes): %s",
                      int(Kernel::SharedStorageSize), cudaGetErrorString(smemErr));
    typename Kernel::Params params = Kernel::to_underlying_arguments(args, nullptr);
    if (Gemm::run(params, stream, nullptr, g.pdl) != cutlass::Status::kSuccess)
      return setError(fcUnhandledCudaError, "the GEMM engine's launch failed: %s",
                      cudaGetErrorString(cudaGetLastError()));
    return fcSuccess;
  }
};

}  // namespace fc::engine
