// decode-gemm: step 1 of the decode engine's design (docs/design.md, "The decode engine"):
// a CUTLASS sm90 GEMM with A and B swapped - D^T [N, M] = B [N, K] x A [M, K]^T, the
// weight's N in the MMA's M, the tokens in its N, as cuBLASLt's nvjet kernels run decode
// shapes - timed against cuBLASLt (the library's Gemm) at decode rows, one GPU, bf16, on
// persistent grids of every SM and of half of them (the design wanted tiles ending in waves,
// so that their pushes could run under the later waves' reads of B; the thirty-sixth
// session's run also tried a third: waves cost the GEMM up to 1.4x at 16 rows). Inputs are
// small integers: every product and sum is exact, so every kernel must agree with cuBLASLt
// bit for bit (checked before timing). Candidates and cuBLASLt are timed interleaved (each
// round replays every graph once, in turn; the medians are reported), each twice: with
// the weight hot in L2 (the same W in every GEMM, as fc-bench times the ops) and cold (each
// GEMM of the graph reads the next of enough copies of W that none is still in L2, as a
// model's decode step reads each layer's weights once).
//
//   build/tools/probes/decode-gemm [rounds]
// Output: CSV, one line per (shape, candidate, CTAs, L2): us per GEMM (graphs of 10 GEMMs).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gemm/gemm.h"
#include "probe_check.h"

namespace {

using Element = cutlass::bfloat16_t;

// TN = the weight's columns per tile (the MMA's M: 64 for ping-pong, 128 cooperative), TT
// = tokens per tile (the MMA's N), TK = K per k-block.
template <int TN, int TT, int TK, bool kPingpong>
struct SwappedGemm {
  using TileShape = cute::Shape<cute::Int<TN>, cute::Int<TT>, cute::Int<TK>>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using MainloopSchedule = std::conditional_t<kPingpong, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                                              cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
  using EpilogueSchedule = std::conditional_t<kPingpong, cutlass::epilogue::TmaWarpSpecialized,
                                              cutlass::epilogue::TmaWarpSpecializedCooperative>;
  // CUTLASS's A is the weight [N, K] row-major; its B the activations [M, K] row-major, i.e.
  // K x M column-major; its D is N x M column-major, i.e. our D [M, N] row-major.
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cutlass::layout::ColumnMajor;
  static constexpr int kAlign = 8;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlign, Element, LayoutD, kAlign,
      EpilogueSchedule>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, kAlign, Element, LayoutB, kAlign, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue,
                                                      cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  // D [M, N] = A [M, K] x W^T, W [N, K], on a persistent grid of at most `ctas` CTAs.
  static bool run(const void* A, const void* W, void* D, int M, int N, int K, int ctas, cudaStream_t stream) {
    static bool smemSet = false;
    if (!smemSet) {
      if (cudaFuncSetAttribute(cutlass::device_kernel<Kernel>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(Kernel::SharedStorageSize)) != cudaSuccess)
        return false;
      smemSet = true;
    }
    auto strideA = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(N, K, 1));
    auto strideB = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(M, K, 1));
    auto strideD = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(N, M, 1));
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = ctas;
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                  {N, M, K, 1},
                                  {static_cast<const Element*>(W), strideA, static_cast<const Element*>(A), strideB},
                                  {{1.f, 0.f}, nullptr, strideD, static_cast<Element*>(D), strideD},
                                  hw};
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess) return false;
    // The persistent scheduler needs no workspace without split-K / stream-K.
    if (Gemm::get_workspace_size(args) != 0) return false;
    typename Kernel::Params params = Kernel::to_underlying_arguments(args, nullptr);
    return Gemm::run(params, stream) == cutlass::Status::kSuccess;
  }
};

using Run = bool (*)(const void*, const void*, void*, int, int, int, int, cudaStream_t);
struct Candidate {
  const char* name;
  Run run;
};
const Candidate kCandidates[] = {
    {"pingpong64x16x128", SwappedGemm<64, 16, 128, true>::run},
    {"pingpong64x32x128", SwappedGemm<64, 32, 128, true>::run},
    {"pingpong64x64x128", SwappedGemm<64, 64, 128, true>::run},
    {"pingpong64x16x256", SwappedGemm<64, 16, 256, true>::run},
    {"pingpong64x32x256", SwappedGemm<64, 32, 256, true>::run},
    {"coop128x16x128", SwappedGemm<128, 16, 128, false>::run},
};

__global__ void fillSmallInts(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    p[i] = __float2bfloat16(float(int(x % 5u) - 2));  // -2..2: sums stay exact in fp32
  }
}

struct Column {
  std::string name;
  int ctas;  // 0: cuBLASLt
  std::function<void(const void* W, cudaStream_t)> call;
};

}  // namespace

int main(int argc, char** argv) {
  requireGpu();
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 30;
  constexpr int kIters = 10;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  fc::Gemm gemm;
  if (gemm.init() != fcSuccess) {
    std::fprintf(stderr, "decode-gemm: cuBLASLt: %s\n", fcGetLastError(nullptr));
    return 1;
  }
  struct Shape {
    int M, N, K;
  };
  std::vector<Shape> shapes;
  // The row-parallel layers at TP 2 of Llama-3-8B and Qwen2.5-32B (o_proj, down_proj) and
  // Llama-3-70B's at TP 8; decode rows.
  for (auto nk : {std::pair{4096, 2048}, {4096, 7168}, {5120, 2560}, {5120, 13824}, {8192, 1024}, {8192, 3584}})
    for (int M : {1, 8, 16, 32, 48, 64, 96, 128, 192, 256}) shapes.push_back({M, nk.first, nk.second});
  int l2 = 0;
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  std::printf("decode-gemm: %d SMs, %d MiB L2, %d rounds, graphs of %d GEMMs; us per GEMM (median)\n", sms, l2 >> 20,
              rounds, kIters);
  std::printf("M,N,K,candidate,ctas,l2,us,over_cublaslt,check\n");
  int failures = 0;
  for (const Shape& sh : shapes) {
    const size_t aElems = size_t(sh.M) * sh.K, wElems = size_t(sh.N) * sh.K, dElems = size_t(sh.M) * sh.N;
    // Copies of W for the cold runs: together at least 3x the L2, so that each GEMM's W
    // was last read 2+ L2-fulls of traffic ago.
    const int copies = std::min(kIters, int((3 * size_t(l2)) / (wElems * 2) + 1));
    __nv_bfloat16 *A, *W, *ref, *D;
    CK(cudaMalloc(&A, aElems * 2));
    CK(cudaMalloc(&W, wElems * 2 * copies));
    CK(cudaMalloc(&ref, dElems * 2));
    CK(cudaMalloc(&D, dElems * 2));
    fillSmallInts<<<256, 256>>>(A, aElems, 17u);
    for (int c = 0; c < copies; ++c) fillSmallInts<<<256, 256>>>(W + c * wElems, wElems, 91u);
    CK(cudaGetLastError());
    std::vector<Column> cols;
    cols.push_back({"cublaslt", 0, [&](const void* w, cudaStream_t st) {
                      if (gemm.matmul(A, size_t(sh.M), w, ref, size_t(sh.N), size_t(sh.K), fcOpT, fcBfloat16, st) !=
                          fcSuccess) {
                        std::fprintf(stderr, "decode-gemm: cuBLASLt: %s\n", fcGetLastError(nullptr));
                        std::exit(1);
                      }
                    }});
    for (const Candidate& c : kCandidates)
      for (int ctas : {sms, sms / 2})
        cols.push_back({c.name, ctas, [&, c, ctas](const void* w, cudaStream_t st) {
                          if (!c.run(A, w, D, sh.M, sh.N, sh.K, ctas, st)) {
                            std::fprintf(stderr, "decode-gemm: %s cannot run %d x %d x %d: %s\n", c.name, sh.M, sh.N,
                                         sh.K, cudaGetErrorString(cudaGetLastError()));
                            std::exit(1);
                          }
                        }});
    // The check: cuBLASLt's product first, then each candidate's against it, D poisoned.
    std::vector<uint16_t> want(dElems), got(dElems);
    cols[0].call(W, s);
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(want.data(), ref, dElems * 2, cudaMemcpyDeviceToHost));
    std::vector<bool> ok(cols.size(), true);
    for (size_t k = 1; k < cols.size(); ++k) {
      CK(cudaMemsetAsync(D, 0xff, dElems * 2, s));
      cols[k].call(W, s);
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(s));
      CK(cudaMemcpy(got.data(), D, dElems * 2, cudaMemcpyDeviceToHost));
      ok[k] = got == want;
      failures += !ok[k];
    }
    // Graphs, then the interleaved rounds.
    // exec[2k]: column k hot (W every time), exec[2k + 1]: cold (the copies in turn).
    std::vector<cudaGraphExec_t> exec(2 * cols.size());
    for (size_t k = 0; k < exec.size(); ++k) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < kIters; ++i) cols[k / 2].call(k % 2 ? W + (i % copies) * wElems : W, s);
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&exec[k], g, 0));
      CK(cudaGraphDestroy(g));
    }
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    std::vector<std::vector<float>> ms(exec.size());
    for (int r = -3; r < rounds; ++r)
      for (size_t k = 0; k < exec.size(); ++k) {
        CK(cudaEventRecord(t0, s));
        CK(cudaGraphLaunch(exec[k], s));
        CK(cudaEventRecord(t1, s));
        CK(cudaEventSynchronize(t1));
        float x = 0;
        CK(cudaEventElapsedTime(&x, t0, t1));
        if (r >= 0) ms[k].push_back(x);
      }
    std::vector<double> us(exec.size());
    for (size_t k = 0; k < exec.size(); ++k) {
      std::sort(ms[k].begin(), ms[k].end());
      us[k] = 1000.0 * ms[k][ms[k].size() / 2] / kIters;
      CK(cudaGraphExecDestroy(exec[k]));
    }
    for (size_t k = 0; k < exec.size(); ++k)
      std::printf("%d,%d,%d,%s,%d,%s,%.2f,%.3f,%s\n", sh.M, sh.N, sh.K, cols[k / 2].name.c_str(), cols[k / 2].ctas,
                  k % 2 ? "cold" : "hot", us[k], us[k] / us[k % 2], ok[k / 2] ? "OK" : "FAIL");
    CK(cudaEventDestroy(t0));
    CK(cudaEventDestroy(t1));
    for (void* p : {static_cast<void*>(A), static_cast<void*>(W), static_cast<void*>(ref), static_cast<void*>(D)})
      CK(cudaFree(p));
  }
  if (failures) std::fprintf(stderr, "decode-gemm: %d candidate runs differ from cuBLASLt\n", failures);
  return failures ? 1 : 0;
}
