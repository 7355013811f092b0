// gemm-configs candidates: the all-gather engine's GEMM with the stream-K schedule in
// shard order (shard_streamk_scheduler.cuh; design.md, "Small M", item 2), 128 x 128
// and 128 x 256 cooperative tiles in 2 x 1 clusters, the rows in 2 segments as if 2
// ranks' shards. The stock CUTLASS mainloop and epilogue (no waits: the GEMM alone).
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include <algorithm>

#include "core/result.h"
#include "gemm_configs.h"
#include "shard_streamk_scheduler.cuh"

namespace fc::engine::probe {
namespace {

using Scheduler = cutlass::gemm::kernel::detail::ShardStreamKScheduler;

template <int TN>
struct StreamK {
  using Element = cutlass::bfloat16_t;
  using TileShape = cute::Shape<cute::_128, cute::Int<TN>, cute::_64>;
  using ClusterShape = cute::Shape<cute::_2, cute::_1, cute::_1>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor, 8, Element,
      cutlass::layout::RowMajor, 8, cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, 8, Element,
      cutlass::layout::ColumnMajor, 8, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue,
                                                      ShardStreamKTag>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  // The partials and flags (the flags zero, and zero again after every run), grown as
  // needed: the probe's first call of a shape is eager, outside any capture.
  static fcResult_t run(const EngineGemm& g, cudaStream_t stream) {
    static float* partials = nullptr;
    static uint32_t* flags = nullptr;
    static size_t partialBytes = 0, flagCount = 0;
    constexpr int kSegments = 2;
    const int slots = g.smCount / Scheduler::kClusterM;
    const size_t needBytes = Scheduler::workspaceBytes(kSegments, slots, 128, TN);
    const size_t needFlags = Scheduler::flagWords(kSegments, slots);
    if (needBytes > partialBytes || needFlags > flagCount) {
      cudaFree(partials);
      cudaFree(flags);
      if (cudaMalloc(&partials, needBytes) != cudaSuccess || cudaMalloc(&flags, needFlags * 4) != cudaSuccess ||
          cudaMemset(flags, 0, needFlags * 4) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
        return setError(fcUnhandledCudaError, "the stream-K probe's workspace");
      partialBytes = needBytes;
      flagCount = needFlags;
    }
    const int M = int(g.M), N = int(g.N), K = int(g.K);
    auto strideA = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(M, K, 1));
    auto strideB = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(N, K, 1));
    auto strideD = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(M, N, 1));
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = g.smCount;
    typename Kernel::TileSchedulerArguments sched;
    sched.segments = kSegments;
    sched.partials = partials;
    sched.flags = flags;
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                  {M, N, K, 1},
                                  {static_cast<const Element*>(g.A), strideA, static_cast<const Element*>(g.B), strideB},
                                  {{1.f, 0.f}, nullptr, strideD, static_cast<Element*>(g.D), strideD},
                                  hw,
                                  sched};
    if (g.transB != fcOpT || Gemm::can_implement(args) != cutlass::Status::kSuccess)
      return setError(fcNotSupported, "the stream-K probe cannot run M, N, K = %d, %d, %d", M, N, K);
    static bool smemSet = false;
    if (!smemSet) {
      if (cudaFuncSetAttribute(cutlass::device_kernel<Kernel>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(Kernel::SharedStorageSize)) != cudaSuccess)
        return setError(fcUnhandledCudaError, "the stream-K probe's shared memory");
      smemSet = true;
    }
    typename Kernel::Params params = Kernel::to_underlying_arguments(args, nullptr);
    if (Gemm::run(params, stream) != cutlass::Status::kSuccess)
      return setError(fcUnhandledCudaError, "the stream-K probe's launch: %s", cudaGetErrorString(cudaGetLastError()));
    return fcSuccess;
  }
};

}  // namespace

fcResult_t streamK128x128c2x1(const EngineGemm& g, cudaStream_t stream) { return StreamK<128>::run(g, stream); }
fcResult_t streamK128x256c2x1(const EngineGemm& g, cudaStream_t stream) { return StreamK<256>::run(g, stream); }

}  // namespace fc::engine::probe
