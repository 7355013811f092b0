// The GPU suite runs one process per rank under tools/fcrun; gpu_main.cc creates
// one communicator for the whole run. Every rank runs the same test cases in the
// same order, so collectives line up: test cases must issue the same calls on
// every rank and check with CHECK (not REQUIRE) after the collectives, so that a
// failed check on one rank does not make it skip calls its peers still make.
#pragma once

#include <cuda_runtime_api.h>

#include <catch2/catch_test_macros.hpp>

#include "fusedcomm.h"

// Streams: a communicator gives each stream a channel in order of first use, so the
// suite uses a fixed set: the legacy stream (nullptr) and `streams`, both made in
// main before any test (the suite's comm has 3 channels).
struct GpuEnv {
  fcComm_t comm = nullptr;
  cudaStream_t streams[2] = {nullptr, nullptr};
  // The suite's workspace per channel: small, so that multi-pass sizes stay cheap.
  static constexpr size_t kWorkspaceBytes = 8u << 20;
  int rank = 0;
  int nranks = 1;
  int device = 0;
};

const GpuEnv& gpuEnv();

#define CUDA_REQUIRE(call)                                                    \
  do {                                                                        \
    cudaError_t e_ = (call);                                                  \
    INFO(#call << ": " << cudaGetErrorString(e_));                            \
    REQUIRE(e_ == cudaSuccess);                                               \
  } while (0)

#define FC_REQUIRE(call)                                                      \
  do {                                                                        \
    fcResult_t r_ = (call);                                                   \
    INFO(#call << ": " << fcGetErrorString(r_) << ": " << fcGetLastError(nullptr)); \
    REQUIRE(r_ == fcSuccess);                                                 \
  } while (0)
