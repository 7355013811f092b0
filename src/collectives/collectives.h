// Host launchers of the collective kernels. Arguments are validated by src/api;
// these only pick a launch shape and enqueue on the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "device/device_comm.h"
#include "fusedcomm.h"

namespace fc {

// One-shot all-reduce of `count` elements. symmetricIn: where every rank's sendbuff
// lies in symmetric memory (16-byte aligned offset, not recvbuff), or NULL to stage
// through the workspace (then count*size <= workspace, checked by the caller).
fcResult_t launchAllReduceOneShot(const DeviceComm& dc, int channel, const void* sendbuff,
                                  void* recvbuff, size_t count, fcDataType_t datatype,
                                  const SymSource* symmetricIn, cudaStream_t stream);

// Lamport one-shot all-reduce (push, poll the data; no flags): count*size must not
// exceed kLamportSlotBytes.
fcResult_t launchAllReduceLamport(const DeviceComm& dc, int channel, const void* sendbuff,
                                  void* recvbuff, size_t count, fcDataType_t datatype,
                                  cudaStream_t stream);

// Two-shot all-reduce (reduce-scatter + all-gather through the workspace regions);
// any count: sizes beyond the workspace run in passes.
fcResult_t launchAllReduceTwoShot(const DeviceComm& dc, int channel, const void* sendbuff,
                                  void* recvbuff, size_t count, fcDataType_t datatype,
                                  const SymSource* symmetricIn, cudaStream_t stream);

// Reduce-scatter of W blocks of recvcount elements; any count (passes).
fcResult_t launchReduceScatter(const DeviceComm& dc, int channel, const void* sendbuff,
                               void* recvbuff, size_t recvcount, fcDataType_t datatype,
                               const SymSource* symmetricIn, cudaStream_t stream);

// All-gather of sendcount elements per rank; any count (passes).
fcResult_t launchAllGather(const DeviceComm& dc, int channel, const void* sendbuff, void* recvbuff,
                           size_t sendcount, fcDataType_t datatype, const SymSource* symmetricIn,
                           cudaStream_t stream);

// Device-side barrier of all ranks on `channel`.
fcResult_t launchBarrier(const DeviceComm& dc, int channel, cudaStream_t stream);

// Bytes of workspace the one-shot all-reduce needs for `bytes` of input.
size_t allReduceOneShotWorkspace(size_t bytes);

}  // namespace fc
