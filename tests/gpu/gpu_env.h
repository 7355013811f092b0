// The GPU suite runs one process per rank under tools/fcrun; gpu_main.cc creates
// one communicator for the whole run. Every rank runs the same test cases in the
// same order, so collectives line up: test cases must issue the same calls on
// every rank and check with CHECK (not REQUIRE) after the collectives, so that a
// failed check on one rank does not make it skip calls its peers still make.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "fusedcomm.h"

// The suite's communicator, its default streams (any other stream works too:
// test_streams.cc), and its shape.
struct GpuEnv {
  fcComm_t comm = nullptr;
  cudaStream_t streams[2] = {nullptr, nullptr};
  // The suite's workspace per channel: small, so that multi-pass sizes stay cheap.
  static constexpr size_t kWorkspaceBytes = 8u << 20;
  // Scratch at init, enough for the fused ops the suite captures before any eager
  // call of the same size (test_streams.cc tests growth on a communicator of its own).
  static constexpr size_t kScratchBytes = 64u << 20;
  int rank = 0;
  int nranks = 1;
  int device = 0;
};

const GpuEnv& gpuEnv();

// A fresh seed per call, equal on all ranks (they run the same test cases in the
// same order) and different per run (the unique id is random).
uint64_t freshSeed();

// Whether a GEMM + reduce-scatter test shape of M x N outputs (over all ranks) runs:
// all do, unless FC_TEST_MAX_ELEMS caps them (tools/gpu-check sanitize: under
// initcheck every read of a cuBLASLt output is reported, design.md, and millions of
// reports took the largest shapes past the device call's limit).
bool shapeInSanitizerBudget(size_t elems);

// A second communicator of the same ranks (collective: every rank calls it at the
// same point); its unique id travels through the suite's communicator. The config's
// blocking flag is honoured: *comm may still be initialising (fcInProgress).
fcResult_t makeComm(fcComm_t* comm, fcConfig_t* config);

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

// A communicator of the suite's ranks with one FC_* variable set while it initialises
// (the choices are read then; var NULL: none), destroyed with the object. Collective.
struct ForcedComm {
  ForcedComm(const char* var, const char* value) {
    const char* before = var ? getenv(var) : nullptr;
    const std::string saved = before ? before : "";
    if (var) setenv(var, value, 1);
    fcConfig_t config = FC_CONFIG_INITIALIZER;
    config.workspaceBytes = GpuEnv::kWorkspaceBytes;
    config.scratchBytes = GpuEnv::kScratchBytes;
    const fcResult_t r = makeComm(&comm, &config);
    if (var) {
      if (before) setenv(var, saved.c_str(), 1);
      else unsetenv(var);
    }
    FC_REQUIRE(r);
  }
  ~ForcedComm() { fcCommDestroy(comm); }
  ForcedComm(const ForcedComm&) = delete;
  ForcedComm& operator=(const ForcedComm&) = delete;
  fcComm_t comm = nullptr;
};

// A device buffer of the test's lifetime (at least one byte).
struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) : n(bytes) { CUDA_REQUIRE(cudaMalloc(&p, bytes ? bytes : 1)); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* c() const { return static_cast<char*>(p); }
  size_t bytes() const { return n; }
  void* p = nullptr;
  size_t n;
};
