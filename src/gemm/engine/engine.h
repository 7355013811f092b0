// The persistent GEMM engine (CUTLASS sm90, TMA + WGMMA, warp-specialized
// cooperative, one launch per op) with tile schedulers of our own that follow the
// communication: all-gather + GEMM waits, per tile row, for the shards of A that the
// copy engine is still pulling (allgather_scheduler.cuh).
//
// Host-side interface: no CUTLASS here, so that the fused ops' schedules compile
// without it; the kernels live in one translation unit per instantiation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "device/device_comm.h"
#include "fusedcomm.h"

namespace fc::engine {

// Where the gathered A's shards stand (a kernel argument, by value).
struct ShardReadiness {
  const uint32_t* flags = nullptr;  // flags[s] != 0: shard s is in place (this rank's memory)
  int64_t M = 0;                    // rows of the gathered A
  int64_t shardRows = 0;            // M / nranks
  DeviceComm dc{};                  // rank, nranks, deadline, error record
  int channel = 0;
};

// D [M, N] = A [M, K] x op(B), row-major, bf16 or fp16 in and out, fp32 accumulation;
// op(B) = B [K, N] (fcOpN) or B^T with B [N, K] (fcOpT). A's rows are the gathered
// shards; the kernel starts on this rank's own rows (which must be in place before
// it starts) and waits for flags[s] before reading shard s.
struct AllGatherGemm {
  const void* A;
  const void* B;
  void* D;
  size_t M, N, K;
  fcOperation_t transB;
  fcDataType_t datatype;
  ShardReadiness ready;
  int smCount;  // SMs of the device: the persistent grid
};

// Whether the engine takes this problem: bf16 / fp16, and every row of A, B and D
// 16-byte aligned (TMA), sizes within int range.
bool allGatherGemmSupports(const AllGatherGemm& g);

// Enqueue the kernel on `stream` (one launch). fcNotSupported when CUTLASS refuses
// the problem.
fcResult_t launchAllGatherGemm(const AllGatherGemm& g, cudaStream_t stream);

}  // namespace fc::engine
