/* The public header must compile as strict C99 (-std=c99 -pedantic -Werror -Wall -Wextra)
 * and keep its ABI: every function is bound to a pointer of its exact type, so a
 * signature change breaks this file; the enum values checked below are only ever
 * appended to, never renumbered. */
#include <stddef.h>

/* The CUDA toolkit's own headers are not pedantic C99 (driver_types.h has anonymous
 * unions): the build passes them as system headers (-isystem), as users' builds do,
 * so only fusedcomm.h itself is held to -std=c99 -pedantic -Werror. */
#include "fusedcomm.h"

int fc_header_c99_probe(void);

/* Compile-time checks without C11's _Static_assert: a negative array size fails. */
#define FC_PROBE_ASSERT(name, cond) typedef char fc_probe_assert_##name[(cond) ? 1 : -1]

FC_PROBE_ASSERT(id_bytes, FC_UNIQUE_ID_BYTES == 128);
FC_PROBE_ASSERT(id_size, sizeof(fcUniqueId) == FC_UNIQUE_ID_BYTES);
FC_PROBE_ASSERT(version_code, FC_VERSION_CODE == FC_MAJOR * 10000 + FC_MINOR * 100 + FC_PATCH);
FC_PROBE_ASSERT(success, fcSuccess == 0);
FC_PROBE_ASSERT(cuda_error, fcUnhandledCudaError == 1);
FC_PROBE_ASSERT(system_error, fcSystemError == 2);
FC_PROBE_ASSERT(internal_error, fcInternalError == 3);
FC_PROBE_ASSERT(invalid_argument, fcInvalidArgument == 4);
FC_PROBE_ASSERT(invalid_usage, fcInvalidUsage == 5);
FC_PROBE_ASSERT(remote_error, fcRemoteError == 6);
FC_PROBE_ASSERT(in_progress, fcInProgress == 7);
FC_PROBE_ASSERT(timeout, fcTimeout == 8);
FC_PROBE_ASSERT(not_supported, fcNotSupported == 9);
FC_PROBE_ASSERT(num_results, fcNumResults == 10);
FC_PROBE_ASSERT(float16, fcFloat16 == 6);
FC_PROBE_ASSERT(float32, fcFloat32 == 7);
FC_PROBE_ASSERT(bfloat16, fcBfloat16 == 9);
FC_PROBE_ASSERT(sum, fcSum == 0);
FC_PROBE_ASSERT(op_n, fcOpN == 0);
FC_PROBE_ASSERT(op_t, fcOpT == 1);

/* fcConfig_t crosses the ABI: its layout on x86-64 / aarch64 Linux (LP64) is fixed;
 * fields are only appended. */
FC_PROBE_ASSERT(config_size_field, offsetof(fcConfig_t, size) == 0);
FC_PROBE_ASSERT(config_magic, offsetof(fcConfig_t, magic) == 8);
FC_PROBE_ASSERT(config_version, offsetof(fcConfig_t, version) == 12);
FC_PROBE_ASSERT(config_blocking, offsetof(fcConfig_t, blocking) == 16);
FC_PROBE_ASSERT(config_max_ctas, offsetof(fcConfig_t, maxCtas) == 20);
FC_PROBE_ASSERT(config_channels, offsetof(fcConfig_t, channels) == 24);
FC_PROBE_ASSERT(config_timeout, offsetof(fcConfig_t, timeoutMs) == 32);
FC_PROBE_ASSERT(config_workspace, offsetof(fcConfig_t, workspaceBytes) == 40);
FC_PROBE_ASSERT(config_scratch, offsetof(fcConfig_t, scratchBytes) == 48);
FC_PROBE_ASSERT(config_fp32_partials, offsetof(fcConfig_t, fp32Partials) == 56);
FC_PROBE_ASSERT(config_sizeof, sizeof(fcConfig_t) == 64);

/* Every public function, bound to a pointer of its declared type. */
struct fc_probe_api {
  const char* (*getErrorString)(fcResult_t);
  const char* (*getLastError)(fcComm_t);
  fcResult_t (*getVersion)(int*);
  fcResult_t (*getUniqueId)(fcUniqueId*);
  fcResult_t (*commInitRank)(fcComm_t*, int, fcUniqueId, int);
  fcResult_t (*commDestroy)(fcComm_t);
  fcResult_t (*commCount)(const fcComm_t, int*);
  fcResult_t (*commUserRank)(const fcComm_t, int*);
  fcResult_t (*commCuDevice)(const fcComm_t, int*);
  fcResult_t (*allReduceOneShot)(const void*, void*, size_t, fcDataType_t, fcRedOp_t, fcComm_t,
                                 cudaStream_t);
  fcResult_t (*commInitRankConfig)(fcComm_t*, int, fcUniqueId, int, fcConfig_t*);
  fcResult_t (*commInitAll)(fcComm_t*, int, const int*);
  fcResult_t (*commAbort)(fcComm_t);
  fcResult_t (*commGetAsyncError)(fcComm_t, fcResult_t*);
  fcResult_t (*barrier)(fcComm_t, cudaStream_t);
  fcResult_t (*memAlloc)(fcComm_t, void**, size_t);
  fcResult_t (*memFree)(fcComm_t, void*);
  fcResult_t (*allReduce)(const void*, void*, size_t, fcDataType_t, fcRedOp_t, fcComm_t,
                          cudaStream_t);
  fcResult_t (*reduceScatter)(const void*, void*, size_t, fcDataType_t, fcRedOp_t, fcComm_t,
                              cudaStream_t);
  fcResult_t (*allGather)(const void*, void*, size_t, fcDataType_t, fcComm_t, cudaStream_t);
  fcResult_t (*allGatherMatmul)(const void*, const void*, void*, void*, size_t, size_t, size_t,
                                fcOperation_t, fcDataType_t, fcComm_t, cudaStream_t);
  fcResult_t (*matmulReduceScatter)(const void*, const void*, void*, size_t, size_t, size_t, fcOperation_t,
                                    fcDataType_t, fcComm_t, cudaStream_t);
};

/* The config initializer is a constant expression usable in C. */
static const fcConfig_t kDefaultConfig = FC_CONFIG_INITIALIZER;

int fc_header_c99_probe(void) {
  struct fc_probe_api api;
  fcUniqueId id;
  fcComm_t comm = NULL;
  fcDataType_t types[3];
  fcRedOp_t op = fcSum;
  fcResult_t res = fcSuccess;
  int bound = 0;
  int version = 0;

  api.getErrorString = fcGetErrorString;
  api.getLastError = fcGetLastError;
  api.getVersion = fcGetVersion;
  api.getUniqueId = fcGetUniqueId;
  api.commInitRank = fcCommInitRank;
  api.commDestroy = fcCommDestroy;
  api.commCount = fcCommCount;
  api.commUserRank = fcCommUserRank;
  api.commCuDevice = fcCommCuDevice;
  api.allReduceOneShot = fcAllReduceOneShot;
  api.commInitRankConfig = fcCommInitRankConfig;
  api.commInitAll = fcCommInitAll;
  api.commAbort = fcCommAbort;
  api.commGetAsyncError = fcCommGetAsyncError;
  api.barrier = fcBarrier;
  api.memAlloc = fcMemAlloc;
  api.memFree = fcMemFree;
  api.allReduce = fcAllReduce;
  api.reduceScatter = fcReduceScatter;
  api.allGather = fcAllGather;
  api.allGatherMatmul = fcAllGatherMatmul;
  api.matmulReduceScatter = fcMatmulReduceScatter;
  bound += api.commInitRankConfig != NULL && api.commInitAll != NULL && api.commAbort != NULL &&
           api.commGetAsyncError != NULL && api.barrier != NULL && api.memAlloc != NULL &&
           api.memFree != NULL && api.allReduce != NULL && api.reduceScatter != NULL &&
           api.allGather != NULL && api.allGatherMatmul != NULL &&
           api.matmulReduceScatter != NULL && fcOpN == 0 && fcOpT == 1 &&
           kDefaultConfig.size == sizeof(fcConfig_t);

  bound += api.getErrorString != NULL;
  bound += api.getLastError != NULL;
  bound += api.getVersion != NULL;
  bound += api.getUniqueId != NULL;
  bound += api.commInitRank != NULL;
  bound += api.commDestroy != NULL;
  bound += api.commCount != NULL;
  bound += api.commUserRank != NULL;
  bound += api.commCuDevice != NULL;
  bound += api.allReduceOneShot != NULL;
  if (bound != 11) return -1;

  /* Calls from C that need no GPU: the version, and a NULL-argument rejection. */
  types[0] = fcFloat16;
  types[1] = fcFloat32;
  types[2] = fcBfloat16;
  if (api.getVersion(&version) != fcSuccess || version != FC_VERSION_CODE) return -2;
  res = api.allReduceOneShot(NULL, NULL, 0, types[2], op, comm, (cudaStream_t)0);
  if (res != fcInvalidArgument) return -3;
  if (api.getErrorString(res) == NULL || api.getLastError(comm)[0] == '\0') return -4;
  return (int)sizeof(id);
}
