// gemm-configs candidates: the all-gather engine's GEMM with the stream-K schedule in
// shard order (shard_streamk_scheduler.cuh; design.md, "Small M", item 2), 128 x 128
// and 128 x 256 cooperative tiles in 2 x 1 clusters, the rows in 2 segments as if 2
// ranks' shards. The stock CUTLASS mainloop and epilogue (no waits: the GEMM alone).
// Measurement switches (the scheduler's): FC_PROBE_SK_MODE (1: the final parts skip the
// fixup's waits and adds, 3: and the other parts their stores: wrong numbers, the
// schedule's time without its fixup), FC_PROBE_SK_SLOTS (cluster slots, default every
// SM's), FC_PROBE_SK_SEGMENTS (default 2), FC_PROBE_SK_TIMELINE=1 (at each shape's first,
// eager call: the occupancy of 2 x 1 clusters, and from clock64 stamps where a slot's time
// goes, per part: mainloop, fixup, epilogue; printed to stderr).
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/result.h"
#include "gemm_configs.h"
#include "shard_streamk_scheduler.cuh"

namespace fc::engine::probe {
namespace {

using Scheduler = cutlass::gemm::kernel::detail::ShardStreamKScheduler;

int envInt(const char* name, int fallback) {
  const char* v = getenv(name);
  return v != nullptr && *v != 0 ? atoi(v) : fallback;
}

// The timeline of one eager run: per part (records of Scheduler::kStampWords), the
// consumer's mainloop (fetched -> fixup entered), its fixup (waits and adds, or the
// partial's store) and its epilogue (fixup done -> next part fetched), in us at the SM
// clock; and per CTA the span from its first fetch to its end.
void printTimeline(const std::vector<unsigned long long>& st, int ctas, int M, int N, int K, int tn) {
  const int kWords = Scheduler::kStampWords, kParts = Scheduler::kMaxParts;
  int khz = 0;
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  const double usPerCycle = 1e3 / double(khz > 0 ? khz : 1980000);
  double main[2] = {0, 0}, fix[2] = {0, 0}, epi[2] = {0, 0}, kb[2] = {0, 0};
  int count[2] = {0, 0}, maxParts = 0;
  std::vector<double> spans;
  for (int c = 0; c < ctas; ++c) {
    const unsigned long long* r = st.data() + size_t(c) * kParts * kWords;
    int p = 0;
    for (; p + 1 < kParts && r[p * kWords + 3] != ~0ull; ++p) {
      const unsigned long long* a = r + p * kWords;
      const unsigned long long* b = a + kWords;
      const int split = (a[3] & 0xFFFF) != uint64_t(K / 64) ? 1 : 0;  // 0: whole tiles
      main[split] += double(a[1] - a[0]);
      fix[split] += double(a[2] - a[1]);
      epi[split] += double(b[0] - a[2]);
      kb[split] += double(a[3] & 0xFFFF);
      ++count[split];
    }
    maxParts = std::max(maxParts, p);
    spans.push_back(double(r[p * kWords] - r[0]) * usPerCycle);
  }
  std::sort(spans.begin(), spans.end());
  fprintf(stderr, "# streamk128x%d timeline %d,%d,%d: %d CTAs, up to %d parts a CTA; CTA span (us) min %.1f median %.1f max %.1f\n",
          tn, M, N, K, ctas, maxParts, spans.front(), spans[spans.size() / 2], spans.back());
  const char* kind[2] = {"whole tiles", "split parts"};
  for (int s = 0; s < 2; ++s)
    if (count[s] > 0)
      fprintf(stderr, "#   %s: %d, mean %.1f k-blocks; mainloop %.2f us, fixup %.2f us, epilogue %.2f us a part\n", kind[s],
              count[s], kb[s] / count[s], main[s] / count[s] * usPerCycle, fix[s] / count[s] * usPerCycle,
              epi[s] / count[s] * usPerCycle);
}

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
    static unsigned long long* stamps = nullptr;
    static size_t partialBytes = 0, flagCount = 0;
    static const int kSegments = std::max(1, envInt("FC_PROBE_SK_SEGMENTS", 2));
    static const int kMode = envInt("FC_PROBE_SK_MODE", 0);
    static const bool kTimeline = envInt("FC_PROBE_SK_TIMELINE", 0) != 0;
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
    const size_t stampWords = size_t(g.smCount) * Scheduler::kMaxParts * Scheduler::kStampWords;
    if (kTimeline && stamps == nullptr && cudaMalloc(&stamps, stampWords * 8) != cudaSuccess)
      return setError(fcUnhandledCudaError, "the stream-K probe's timeline");
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
    sched.mode = kMode;
    sched.slots = envInt("FC_PROBE_SK_SLOTS", 0);
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
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(stream, &capturing);
    if (kTimeline && capturing == cudaStreamCaptureStatusNone) {
      // Eager (the shape's first call): two runs to warm up, then one stamped.
      for (int i = 0; i < 2; ++i)
        if (Gemm::run(params, stream) != cutlass::Status::kSuccess) return setError(fcUnhandledCudaError, "launch");
      params.scheduler.stamps = stamps;
      if (cudaMemsetAsync(stamps, 0, stampWords * 8, stream) != cudaSuccess ||
          Gemm::run(params, stream) != cutlass::Status::kSuccess || cudaStreamSynchronize(stream) != cudaSuccess)
        return setError(fcUnhandledCudaError, "the stream-K probe's timeline run");
      params.scheduler.stamps = nullptr;
      std::vector<unsigned long long> host(stampWords);
      cudaMemcpy(host.data(), stamps, stampWords * 8, cudaMemcpyDeviceToHost);
      int clusters = 0;
      cudaLaunchConfig_t cfg{};
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = 2;
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      cfg.gridDim = dim3(unsigned(params.scheduler.slots * 2), 1, 1);
      cfg.blockDim = dim3(Kernel::MaxThreadsPerBlock, 1, 1);
      cfg.dynamicSmemBytes = Kernel::SharedStorageSize;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      cudaOccupancyMaxActiveClusters(&clusters, cutlass::device_kernel<Kernel>, &cfg);
      fprintf(stderr, "# streamk128x%d: %d cluster slots launched, at most %d 2 x 1 clusters resident, mode %d, %d segments\n",
              TN, params.scheduler.slots, clusters, kMode, params.scheduler.segments);
      printTimeline(host, params.scheduler.slots * 2, M, N, K, TN);
    }
    if (Gemm::run(params, stream) != cutlass::Status::kSuccess)
      return setError(fcUnhandledCudaError, "the stream-K probe's launch: %s", cudaGetErrorString(cudaGetLastError()));
    return fcSuccess;
  }
};

}  // namespace

fcResult_t streamK128x128c2x1(const EngineGemm& g, cudaStream_t stream) { return StreamK<128>::run(g, stream); }
fcResult_t streamK128x256c2x1(const EngineGemm& g, cudaStream_t stream) { return StreamK<256>::run(g, stream); }

}  // namespace fc::engine::probe
