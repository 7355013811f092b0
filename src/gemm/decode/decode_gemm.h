// The decode GEMM: a CUTLASS sm90 kernel for the few-row products of a decode step, with
// A and B swapped - D^T [N, rows] = B [N, K] x A^T, the weight's N in the MMA's M (64 per
// tile), the tokens in its N (16 or 32 per tile) - as cuBLASLt's own nvjet kernels run
// such shapes. fc::Gemm runs it instead of cuBLASLt where tuning::decodeGemmTokens says
// it is faster (measured: long K, few rows; docs/design.md, "The decode GEMM").
//
// Host-side interface: no CUTLASS here; the kernels live in one translation unit per
// instantiation (decode_gemm_<type>_<tile>.cu, and the decode engine's pushing kernels
// decode_gemm_push_<type>_<tile>.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "fusedcomm.h"

namespace fc::decode {

// D [rows, N] = A [rows, K] x B^T with B [N, K] (an nn.Linear weight; fcOpT only), all
// row-major and contiguous, bf16 or fp16 in and out, fp32 accumulation, rounded once.
struct DecodeGemm {
  const void* A;
  const void* B;
  void* D;  // may lie in a peer's memory (TMA stores through the mapping)
  size_t rows, N, K;
  fcDataType_t datatype;
  // 16 (64 x 16 x 256 tiles) or 32 (64 x 32 x 128): tuning::decodeGemmTokens; the decode
  // engine's pushing kernels also 64 (64 x 64 x 128) and 128 (64 x 128 x 64):
  // tuning::decodeEngineTokens.
  int tokensPerTile;
  int smCount;  // the persistent grid's CTAs at most
  // The decode engine (fcMatmulAllReduce and its norm forms at 2 ranks, push_epilogue.cuh):
  // each tile also stored into push[b], our slot ([rows, N] row-major) of the peer's
  // Lamport Rows set in buffer b, b = *pushIndex (the rank's Rows buffer index, read per
  // tile). NULL: no pushes (the plain decode GEMM).
  void* push[3] = {nullptr, nullptr, nullptr};
  const uint32_t* pushIndex = nullptr;
};

// bf16 / fp16, a tile width above built for the kernel (with or without pushes), sizes
// within int range, every row and base 16-byte aligned (TMA).
bool decodeGemmSupports(const DecodeGemm& g);

// Allow the kernels' shared memory on the current device: once per device, outside any
// capture (fc::Gemm::init).
fcResult_t prepareDecodeGemms();

// Enqueue the kernel on `stream` (one launch, no workspace; the pushing kernel where
// g.push is set). fcNotSupported when CUTLASS refuses the problem.
fcResult_t launchDecodeGemm(const DecodeGemm& g, cudaStream_t stream);

}  // namespace fc::decode
