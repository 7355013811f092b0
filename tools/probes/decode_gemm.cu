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
// Split-K (the thirty-eighth session): at 16 tokens a 64-column tile, N = 4096 gives 64
// tiles, so the kernel streams the weight from 64 SMs of 132 (the same time on half of
// them). The split candidates cut K into S batches (CUTLASS's L mode, each batch a K range
// of the same operands), each tile's fp32 partial into a workspace, and a second kernel,
// launched with PDL behind the GEMM (which lets it launch at its last tiles: grid
// dependency control, as the library's decode GEMM), sums the S partials in order and
// rounds once. read-w is the bound: a kernel that only reads the weight (16-byte loads
// from every SM), timed the same way, hot and cold.
//
//   build/tools/probes/decode-gemm [rounds]
// DECODE_GEMM_ROWS (e.g. "1,16,48"), DECODE_GEMM_LAYERS ("4096x7168,5120x13824") and
// DECODE_GEMM_ONLY (candidates whose name contains it; cuBLASLt always runs) narrow the run.
// Output: CSV, one line per (shape, candidate, CTAs, L2): us per GEMM (graphs of 10 GEMMs).
#define CUTLASS_ENABLE_GDC_FOR_SM90 1  // the split candidates' reduction launches early
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

// A CUTLASS kernel's shared memory beyond 48 KiB, allowed once (one GPU here).
template <class Kernel>
bool allowSmem() {
  static const bool ok = cudaFuncSetAttribute(cutlass::device_kernel<Kernel>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              int(Kernel::SharedStorageSize)) == cudaSuccess;
  return ok;
}

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
    if (!allowSmem<Kernel>()) return false;
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

// The split partials' workspace: S x M x N fp32, the most any shape here needs.
constexpr size_t kSplitWorkspaceBytes = size_t(4) * 256 * 8192 * 4;
float* splitWorkspace = nullptr;

// D [M, N] = round(sum over s in order of P[s] [M, N]), one thread per 4 elements; launched
// with PDL behind the split GEMM: nothing is read before its grid has completed.
template <int S>
__global__ void sumSplits(const float4* __restrict__ P, __nv_bfloat16* D, size_t n4) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4; i += size_t(gridDim.x) * blockDim.x) {
    float4 a = P[i];
#pragma unroll
    for (int s = 1; s < S; ++s) {
      const float4 b = P[size_t(s) * n4 + i];
      a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;
    }
    __nv_bfloat162* d = reinterpret_cast<__nv_bfloat162*>(D) + 2 * i;
    d[0] = __floats2bfloat162_rn(a.x, a.y);
    d[1] = __floats2bfloat162_rn(a.z, a.w);
  }
}

// Split-K: the ping-pong 64 x TT x TK kernel over S batches of K / S columns each
// (batch strides K / S into the same A and W), fp32 partials, then sumSplits.
template <int TT, int TK, int S>
struct SplitGemm {
  using TileShape = cute::Shape<cute::_64, cute::Int<TT>, cute::Int<TK>>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cutlass::layout::ColumnMajor;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, 4, float, LayoutD, 4,
      cutlass::epilogue::TmaWarpSpecialized>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, 8, Element, LayoutB, 8, float, TileShape,
      ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedPingpong>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue,
                                                      cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static bool run(const void* A, const void* W, void* D, int M, int N, int K, int ctas, cudaStream_t stream) {
    if (!allowSmem<Kernel>()) return false;
    const int Ks = K / S;
    if (Ks * S != K || Ks % 8 != 0 || size_t(S) * M * N * 4 > kSplitWorkspaceBytes || (size_t(M) * N) % 4 != 0)
      return false;
    auto strideA = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(N, K, 1));
    auto strideB = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(M, K, 1));
    auto strideD = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(N, M, S));
    cute::get<2>(strideA) = int64_t(Ks);  // batch s: columns [s Ks, (s + 1) Ks) of the same rows
    cute::get<2>(strideB) = int64_t(Ks);
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = ctas;
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kBatched,
                                  {N, M, Ks, S},
                                  {static_cast<const Element*>(W), strideA, static_cast<const Element*>(A), strideB},
                                  {{1.f, 0.f}, nullptr, strideD, splitWorkspace, strideD},
                                  hw};
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess) return false;
    if (Gemm::get_workspace_size(args) != 0) return false;
    typename Kernel::Params params = Kernel::to_underlying_arguments(args, nullptr);
    if (Gemm::run(params, stream) != cutlass::Status::kSuccess) return false;
    const size_t n4 = size_t(M) * N / 4;
    cudaLaunchAttribute attr;
    const unsigned blocks = unsigned(std::min<size_t>((n4 + 255) / 256, size_t(2 * ctas)));
    const cudaLaunchConfig_t cfg = pdlLaunchConfig(dim3(blocks), dim3(256), stream, &attr);
    return cudaLaunchKernelEx(&cfg, sumSplits<S>, reinterpret_cast<const float4*>(splitWorkspace),
                              static_cast<__nv_bfloat16*>(D), n4) == cudaSuccess;
  }
};

// The bound: read the weight once (16-byte loads, every SM), as the GEMM must.
__global__ void readOnly(const uint4* __restrict__ w, size_t n16, unsigned* sink) {
  uint32_t x = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(w + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) *sink = x;  // keeps the loads
}
unsigned* readSink = nullptr;

bool readWeight(const void*, const void* W, void*, int, int N, int K, int ctas, cudaStream_t stream) {
  const size_t n16 = size_t(N) * K * 2 / 16;
  readOnly<<<unsigned(ctas), 512, 0, stream>>>(static_cast<const uint4*>(W), n16, readSink);
  return cudaGetLastError() == cudaSuccess;
}

using Run = bool (*)(const void*, const void*, void*, int, int, int, int, cudaStream_t);
struct Candidate {
  const char* name;
  Run run;
  int ctasPerSm;  // 0: a persistent GEMM, on all SMs and on half (columns of both)
  bool exact;     // its D must equal cuBLASLt's
};
const Candidate kCandidates[] = {
    {"pingpong64x16x128", SwappedGemm<64, 16, 128, true>::run, 0, true},
    {"pingpong64x32x128", SwappedGemm<64, 32, 128, true>::run, 0, true},
    {"pingpong64x64x128", SwappedGemm<64, 64, 128, true>::run, 0, true},
    {"pingpong64x128x64", SwappedGemm<64, 128, 64, true>::run, 0, true},
    {"pingpong64x16x256", SwappedGemm<64, 16, 256, true>::run, 0, true},
    {"pingpong64x32x256", SwappedGemm<64, 32, 256, true>::run, 0, true},
    {"coop128x16x128", SwappedGemm<128, 16, 128, false>::run, 0, true},
    {"split2-64x16x256", SplitGemm<16, 256, 2>::run, 0, true},
    {"split4-64x16x256", SplitGemm<16, 256, 4>::run, 0, true},
    {"split2-64x32x128", SplitGemm<32, 128, 2>::run, 0, true},
    {"split4-64x16x128", SplitGemm<16, 128, 4>::run, 0, true},
    {"read-w", readWeight, 4, false},
};

std::vector<int> intList(const char* env, std::vector<int> fallback) {
  const char* v = std::getenv(env);
  if (v == nullptr || *v == 0) return fallback;
  std::vector<int> out;
  for (const char* p = v; *p;) {
    out.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

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
  if (gemm.init(false) != fcSuccess) {  // cuBLASLt's kernels only: the column compared against
    std::fprintf(stderr, "decode-gemm: cuBLASLt: %s\n", fcGetLastError(nullptr));
    return 1;
  }
  struct Shape {
    int M, N, K;
  };
  std::vector<Shape> shapes;
  // The row-parallel layers at TP 2 of Llama-3-8B and Qwen2.5-32B (o_proj, down_proj) and
  // Llama-3-70B's at TP 8; decode rows.
  const char* layers = std::getenv("DECODE_GEMM_LAYERS");
  for (auto nk : {std::pair{4096, 2048}, {4096, 7168}, {5120, 2560}, {5120, 13824}, {8192, 1024}, {8192, 3584}}) {
    const std::string name = std::to_string(nk.first) + "x" + std::to_string(nk.second);
    if (layers != nullptr && *layers && std::string(layers).find(name) == std::string::npos) continue;
    for (int M : intList("DECODE_GEMM_ROWS", {1, 8, 16, 32, 48, 64, 96, 128, 192, 256}))
      shapes.push_back({M, nk.first, nk.second});
  }
  const char* only = std::getenv("DECODE_GEMM_ONLY");
  CK(cudaMalloc(&splitWorkspace, kSplitWorkspaceBytes));
  CK(cudaMalloc(&readSink, sizeof(unsigned)));
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
    std::vector<bool> exact{true};
    for (const Candidate& c : kCandidates)
      for (int ctas : c.ctasPerSm ? std::vector<int>{c.ctasPerSm * sms} : std::vector<int>{sms, sms / 2}) {
        if (only != nullptr && *only && std::string(c.name).find(only) == std::string::npos) continue;
        exact.push_back(c.exact);
        cols.push_back({c.name, ctas, [&, c, ctas](const void* w, cudaStream_t st) {
                          if (!c.run(A, w, D, sh.M, sh.N, sh.K, ctas, st)) {
                            std::fprintf(stderr, "decode-gemm: %s cannot run %d x %d x %d: %s\n", c.name, sh.M, sh.N,
                                         sh.K, cudaGetErrorString(cudaGetLastError()));
                            std::exit(1);
                          }
                        }});
      }
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
      ok[k] = !exact[k] || got == want;
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
                  k % 2 ? "cold" : "hot", us[k], us[k] / us[k % 2],
                  !exact[k / 2] ? "-" : ok[k / 2] ? "OK" : "FAIL");
    CK(cudaEventDestroy(t0));
    CK(cudaEventDestroy(t1));
    for (void* p : {static_cast<void*>(A), static_cast<void*>(W), static_cast<void*>(ref), static_cast<void*>(D)})
      CK(cudaFree(p));
  }
  CK(cudaFree(splitWorkspace));
  CK(cudaFree(readSink));
  if (failures) std::fprintf(stderr, "decode-gemm: %d candidate runs differ from cuBLASLt\n", failures);
  return failures ? 1 : 0;
}
