// The compute of the all-gather + GEMM engine: a stock CUTLASS sm90 TMA + WGMMA
// warp-specialized cooperative persistent GEMM (CollectiveBuilder mainloop and
// epilogue), with our tile scheduler (allgather_scheduler.cuh) as its schedule.
// One instantiation per (element type, B layout), each in its own translation unit.
//
// Configuration: 128 x 256 x 64 tiles, 2 x 1 clusters (the B tile is multicast to
// both CTAs of a cluster, which work on neighbouring rows of A), stages as many as
// shared memory holds after the epilogue's. That is the configuration PyTorch's
// async-input GEMM uses; per-shape tuning is future work (docs/perf.md).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include <mutex>

#include "core/result.h"
#include "gemm/engine/allgather_scheduler.cuh"
#include "gemm/engine/engine.h"

namespace fc::engine {

template <typename Element, bool kTransB>
struct AllGatherGemmKernel {
  using LayoutA = cutlass::layout::RowMajor;  // [M, K]
  // CUTLASS sees B as K x N: [N, K] row-major (fcOpT) is its column-major (K-major).
  using LayoutB = std::conditional_t<kTransB, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  using LayoutD = cutlass::layout::RowMajor;  // [M, N]
  static constexpr int kAlign = 16 / sizeof(Element);
  using TileShape = cute::Shape<cute::_128, cute::_256, cute::_64>;
  using ClusterShape = cute::Shape<cute::_2, cute::_1, cute::_1>;

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      void, LayoutD, kAlign,  // no C: D = A x op(B)
      Element, LayoutD, kAlign, cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, kAlign, Element, LayoutB, kAlign, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue,
                                                      AllGatherSchedulerTag>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static fcResult_t run(const AllGatherGemm& g, cudaStream_t stream) {
    const int M = int(g.M), N = int(g.N), K = int(g.K);
    auto strideA = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(M, K, 1));
    auto strideB = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(N, K, 1));
    auto strideD = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(M, N, 1));
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;  // only read with sm_count = 0
    hw.sm_count = g.smCount;
    typename Kernel::TileSchedulerArguments sched;
    sched.ready = g.ready;
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                  {M, N, K, 1},
                                  {static_cast<const Element*>(g.A), strideA, static_cast<const Element*>(g.B), strideB},
                                  {{1.f, 0.f}, nullptr, strideD, static_cast<Element*>(g.D), strideD},
                                  hw,
                                  sched};
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess)
      return setError(fcNotSupported, "the GEMM engine cannot run M, N, K = %d, %d, %d", M, N, K);
    // Shared memory beyond 48 KiB must be allowed once per kernel, outside any capture.
    static std::once_flag smemOnce;
    static cudaError_t smemErr = cudaSuccess;
    std::call_once(smemOnce, [] {
      smemErr = cudaFuncSetAttribute(cutlass::device_kernel<Kernel>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(Kernel::SharedStorageSize));
    });
    if (smemErr != cudaSuccess)
      return setError(fcUnhandledCudaError, "the GEMM engine's shared memory (%d bytes): %s",
                      int(Kernel::SharedStorageSize), cudaGetErrorString(smemErr));
    typename Kernel::Params params = Kernel::to_underlying_arguments(args, nullptr);
    if (Gemm::run(params, stream) != cutlass::Status::kSuccess)
      return setError(fcUnhandledCudaError, "the GEMM engine's launch failed: %s",
                      cudaGetErrorString(cudaGetLastError()));
    return fcSuccess;
  }
};

}  // namespace fc::engine
