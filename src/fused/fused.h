// Fused compute + communication ops: orchestration of the copy engine
// (src/collectives), the barrier kernels and cuBLASLt GEMMs (src/gemm) on the
// caller's stream and the channel's copy queue. Arguments are validated by src/api.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/copy_queue.h"
#include "device/device_comm.h"
#include "fusedcomm.h"
#include "gemm/gemm.h"

namespace fc {

struct AllGatherMatmulArgs {
  const void* A;    // [M/W, K] shard
  const void* B;    // [K, N] (fcOpN) or [N, K] (fcOpT)
  void* C;          // [M, N]
  void* Agathered;  // [M, K] or NULL
  size_t M, N, K;
  fcOperation_t transB;
  fcDataType_t datatype;
};

enum class FusedChoice { Auto, Fused, Unfused };

// C = allgather(A) x op(B); see fcAllGatherMatmul. symmetricA: where every rank's A
// lies in symmetric memory (zero-copy), or NULL.
fcResult_t launchAllGatherMatmul(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm,
                                 const AllGatherMatmulArgs& a, const SymSource* symmetricA,
                                 FusedChoice choice, cudaStream_t stream);

}  // namespace fc
