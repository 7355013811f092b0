// Entry point of the GPU suite: skip cleanly (exit 77, meson's "skipped") where
// there is no GPU, otherwise join the communicator and run Catch2.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <catch2/catch_session.hpp>

#include "fc_data.h"
#include "fc_env.h"
#include "gpu_env.h"

namespace {
GpuEnv env;
}

const GpuEnv& gpuEnv() { return env; }

uint64_t freshSeed() {
  static uint64_t counter = 0, base = 0;
  if (base == 0) {
    const char* id = getenv("FC_UNIQUE_ID");
    for (const char* p = id ? id : "x"; *p; ++p) base = fcSplitMix(base ^ uint64_t(*p));
  }
  return fcSplitMix(base + ++counter);
}

bool shapeInSanitizerBudget(size_t elems) {
  const char* cap = getenv("FC_TEST_MAX_ELEMS");
  return cap == nullptr || *cap == '\0' || elems <= std::strtoull(cap, nullptr, 10);
}

fcResult_t makeComm(fcComm_t* comm, fcConfig_t* config) {
  // Rank 0's id bytes summed with everybody else's zeros (as fp32, exactly).
  fcUniqueId id;
  std::vector<float> bytes(sizeof id.internal, 0.f);
  if (env.rank == 0) {
    FC_REQUIRE(fcGetUniqueId(&id));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = float(uint8_t(id.internal[i]));
  }
  float* d;
  CUDA_REQUIRE(cudaMalloc(reinterpret_cast<void**>(&d), bytes.size() * sizeof(float)));
  CUDA_REQUIRE(cudaMemcpy(d, bytes.data(), bytes.size() * sizeof(float), cudaMemcpyHostToDevice));
  FC_REQUIRE(fcAllReduceOneShot(d, d, bytes.size(), fcFloat32, fcSum, env.comm, nullptr));
  CUDA_REQUIRE(cudaMemcpy(bytes.data(), d, bytes.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_REQUIRE(cudaFree(d));
  for (size_t i = 0; i < bytes.size(); ++i) id.internal[i] = char(uint8_t(bytes[i]));
  return fcCommInitRankConfig(comm, env.nranks, id, env.rank, config);
}

int main(int argc, char** argv) {
  int ndev = 0;
  cudaError_t err = cudaGetDeviceCount(&ndev);
  if (err != cudaSuccess || ndev == 0) {
    printf("SKIP: no CUDA GPU here (%s): the GPU suite needs one GPU per rank\n",
           err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  fcUniqueId id;
  if (!fcUniqueIdFromEnv(&id)) {
    fprintf(stderr, "FC_UNIQUE_ID is not set: run this under tools/fcrun -n N\n");
    return 2;
  }
  env.rank = fcEnvInt("FC_RANK", 0);
  env.nranks = fcEnvInt("FC_WORLD_SIZE", 1);
  const int localRank = fcEnvInt("FC_LOCAL_RANK", env.rank);
  // FC_SHARE_GPU=1 (the library's test-only switch) puts several ranks on one GPU.
  const bool shareGpu = fcEnvInt("FC_SHARE_GPU", 0) == 1;
  if (localRank >= ndev && !shareGpu) {
    printf("SKIP: rank %d needs GPU %d, only %d visible (FC_SHARE_GPU=1 shares them)\n", env.rank,
           localRank, ndev);
    return 77;
  }
  env.device = localRank % ndev;
  if (cudaSetDevice(env.device) != cudaSuccess) return 2;
  // A desynchronised test must fail in seconds, not after the default 120 s.
  setenv("FC_TIMEOUT_MS", "30000", 0);
  fcConfig_t config = FC_CONFIG_INITIALIZER;
  config.workspaceBytes = GpuEnv::kWorkspaceBytes;
  config.scratchBytes = GpuEnv::kScratchBytes;
  fcResult_t res = fcCommInitRankConfig(&env.comm, env.nranks, id, env.rank, &config);
  if (res != fcSuccess) {
    fprintf(stderr, "fcCommInitRank: %s: %s\n", fcGetErrorString(res), fcGetLastError(nullptr));
    return 1;
  }
  for (cudaStream_t& s : env.streams)
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return 2;
  int rc = Catch::Session().run(argc, argv);
  for (cudaStream_t s : env.streams) cudaStreamDestroy(s);
  res = fcCommDestroy(env.comm);
  if (res != fcSuccess) {
    fprintf(stderr, "fcCommDestroy: %s: %s\n", fcGetErrorString(res), fcGetLastError(nullptr));
    return 1;
  }
  return rc;
}
