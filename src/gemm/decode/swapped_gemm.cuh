// The decode GEMM's kernel (decode_gemm.h): CUTLASS's sm90 ping-pong kernel, TMA loads and
// WGMMA, on tiles of 64 weight rows x TT tokens x TK, with CUTLASS's A the weight B [N, K]
// (row-major), its B the activations A [rows, K] (row-major = K x rows column-major), its D
// our D [rows, N] (row-major = N x rows column-major). Persistent over the device's SMs;
// one cluster per CTA (the tokens are few: multicast would share almost nothing).
//
// Why ping-pong on 64-row tiles: a decode product is bound by reading the weight once;
// tools/probes/decode-gemm (one H200, docs/perf-log.md) found these tiles 12-15 % faster
// than cuBLASLt's choice at 1-48 x 4096 x 7168 and 4-11 % at 1-64 x 5120 x 13824 (K well
// beyond N), level or behind at K <= N, and a cooperative 128-row tile never ahead.
#pragma once

// Grid dependency control in CUTLASS's sm90 kernels (off unless asked for): each consumer
// warp group lets the next kernel on the stream launch (griddepcontrol.launch_dependents)
// when it starts its last tile, so that a kernel launched behind the GEMM with PDL - the
// all-reduce, the local residual + RMSNorm - is resident and through its prologue when the
// GEMM ends; it still waits for the GEMM's grid (griddepcontrol.wait) before reading the
// product. cuBLASLt's kernels let nothing launch early (tools/probes/pdl-edge). The
// kernel's own griddepcontrol.wait before its first loads is a no-op: it is launched
// without PDL. Only this kernel's translation units see the macro (whole-program device
// code: no other TU's CUTLASS kernels change).
#define CUTLASS_ENABLE_GDC_FOR_SM90 1

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include <cstdint>
#include <type_traits>

#include "core/result.h"
#include "gemm/decode/decode_gemm.h"
#include "gemm/decode/push_epilogue.cuh"

namespace fc::decode {

// kPush: the decode engine's kernel (push_epilogue.cuh): each tile also stored into the
// peer's Lamport Rows slot of the current buffer.
template <class Element, int TT, int TK, bool kPush = false>
struct SwappedGemm {
  using TileShape = cute::Shape<cute::_64, cute::Int<TT>, cute::Int<TK>>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using LayoutA = cutlass::layout::RowMajor;     // the weight, N x K
  using LayoutB = cutlass::layout::ColumnMajor;  // the activations, K x rows
  using LayoutD = cutlass::layout::ColumnMajor;  // the product, N x rows
  static constexpr int kAlign = 8;               // 16 bytes
  using Schedule = cutlass::epilogue::TmaWarpSpecialized;
  using StockEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlign, Element, LayoutD, kAlign,
      Schedule>::CollectiveOp;
  using Push = PushFusionOf<Element, TileShape, Schedule, LayoutD>;
  using PushEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlign, Element, LayoutD, kAlign,
      Schedule, typename Push::type>::CollectiveOp;
  using Epilogue = std::conditional_t<kPush, BufferedPushEpilogue<PushEpilogue>, StockEpilogue>;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, kAlign, Element, LayoutB, kAlign, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedPingpong>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue,
                                                      cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  // Shared memory beyond 48 KiB is allowed per kernel and device (a process may drive
  // several GPUs: fcCommInitAll); called from fc::Gemm::init, outside any capture.
  static fcResult_t prepare() {
    const cudaError_t e = cudaFuncSetAttribute(cutlass::device_kernel<Kernel>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               int(Kernel::SharedStorageSize));
    if (e != cudaSuccess)
      return setError(fcUnhandledCudaError, "the decode GEMM's shared memory (%d bytes): %s",
                      int(Kernel::SharedStorageSize), cudaGetErrorString(e));
    return fcSuccess;
  }

  static fcResult_t run(const DecodeGemm& g, cudaStream_t stream) {
    const int M = int(g.rows), N = int(g.N), K = int(g.K);
    auto strideA = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(N, K, 1));
    auto strideB = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(M, K, 1));
    auto strideD = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(N, M, 1));
    cutlass::KernelHardwareInfo hw;
    if (const cudaError_t e = cudaGetDevice(&hw.device_id); e != cudaSuccess)
      return setError(fcUnhandledCudaError, "the decode GEMM: cudaGetDevice: %s", cudaGetErrorString(e));
    hw.sm_count = g.smCount;
    typename Epilogue::Arguments epilogue{};
    if constexpr (kPush) {
      if (g.pushIndex == nullptr || g.push[0] == nullptr || g.push[1] == nullptr || g.push[2] == nullptr)
        return setError(fcInternalError, "the decode engine's GEMM has no push slots");
      typename Push::Stride strideP{};
      strideP = strideD;  // the slot is [rows, N] row-major, as D
      auto buffer = [&](int b) -> typename PushEpilogue::Arguments {
        return {Push::arguments(static_cast<Element*>(g.push[b]), strideP), nullptr, strideD,
                static_cast<Element*>(g.D), strideD};
      };
      static_cast<typename PushEpilogue::Arguments&>(epilogue) = buffer(0);
      epilogue.buffer[0] = buffer(1);
      epilogue.buffer[1] = buffer(2);
      epilogue.index = g.pushIndex;
    } else {
      if (g.push[0] != nullptr) return setError(fcInternalError, "the decode GEMM's kernel cannot push");
      epilogue = {{1.f, 0.f}, nullptr, strideD, static_cast<Element*>(g.D), strideD};
    }
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {N, M, K, 1},
        {static_cast<const Element*>(g.B), strideA, static_cast<const Element*>(g.A), strideB},
        epilogue,
        hw};
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess)
      return setError(fcNotSupported, "the decode GEMM cannot run rows, N, K = %d, %d, %d", M, N, K);
    // The persistent scheduler without split-K or stream-K needs no workspace.
    if (Gemm::get_workspace_size(args) != 0)
      return setError(fcInternalError, "the decode GEMM asks for a workspace (rows, N, K = %d, %d, %d)", M, N, K);
    typename Kernel::Params params = Kernel::to_underlying_arguments(args, nullptr);
    if (Gemm::run(params, stream) != cutlass::Status::kSuccess)
      return setError(fcUnhandledCudaError, "the decode GEMM's launch failed: %s",
                      cudaGetErrorString(cudaGetLastError()));
    return fcSuccess;
  }
};

}  // namespace fc::decode
