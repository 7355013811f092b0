// What the fused GEMM entry points share (api_fused.cc defines it; api_matmul_all_reduce.cc
// uses it too): their argument checks and the GEMM + reduce-scatter's arguments.
#pragma once

#include "api/api.h"
#include "fused/fused.h"

namespace fc::api {

// [a, a + an) and [b, b + bn) share a byte (in integers: sizes were checked to fit).
bool overlaps(const void* a, size_t an, const void* b, size_t bn);

// Shape, dtype, transB and pointer checks shared by the fused GEMM ops (`extra`: an
// optional fourth buffer of at most M x K elements, NULL allowed), sizes before the
// callers' overlap checks. rowsPerRank: M must be a multiple of nranks.
fcResult_t checkGemmArgs(const char* fn, const fcComm* comm, size_t M, size_t N, size_t K, fcOperation_t transB,
                         fcDataType_t datatype, const void* A, const void* B, const void* C, const void* extra,
                         bool rowsPerRank);

// The GEMM engine's SMs: the GPU's, or fewer (FC_ENGINE_SMS).
int engineSms(const fcComm* comm);

// fcMatmulReduceScatter's arguments for this communicator's settings (C: the [M/W, N]
// block; no scratch yet).
fc::MatmulReduceScatterArgs matmulReduceScatterArgs(const fcComm* comm, const void* A, const void* B, void* C,
                                                    size_t M, size_t N, size_t K, fcOperation_t transB,
                                                    fcDataType_t datatype);

}  // namespace fc::api
