// The communicator: who we are (rank, world, device), the bootstrap connections,
// the symmetric heap with its signal pads and workspace, and the host-mapped error
// record that device spin-waits write when they give up.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bootstrap/bootstrap.h"
#include "device/device_comm.h"
#include "fusedcomm.h"
#include "memory/symmetric_heap.h"

struct fcComm {
  static constexpr uint32_t kAlive = 0x4d4d4f43;  // "COMM"; cleared by destroy
  uint32_t magic = kAlive;
  int rank = 0;
  int nranks = 0;
  int cudaDev = -1;
  uint64_t timeoutMs = 0;
  uint64_t workspaceBytes = 0;
  std::unique_ptr<fc::Bootstrap> bootstrap;
  std::unique_ptr<fc::SymmetricHeap> heap;
  fc::ErrorRecord* errorHost = nullptr;  // cudaHostAlloc'd, mapped
  fc::DeviceComm dev{};                  // kernel argument
  fcResult_t asyncError = fcSuccess;     // sticky once a kernel gave up
  std::string asyncMessage;              // its explanation, repeated by every later call
};

namespace fc {

struct CommParams {
  uint64_t timeoutMs;
  uint64_t workspaceBytes;
};

// Read FC_TIMEOUT_MS and FC_WORKSPACE_BYTES (defaults 120000 ms, 64 MiB).
fcResult_t commParamsFromEnv(CommParams* params);

// Collective creation on the calling thread's current device.
fcResult_t commCreate(const UniqueIdBody& id, int nranks, int rank, const CommParams& params,
                      fcComm** out);

// Wait for the device to finish this communicator's work, then free everything.
fcResult_t commDestroy(fcComm* comm);

// fcSuccess, or the sticky error left by a kernel that timed out or was aborted,
// with a message naming the op, the peer and the epochs.
fcResult_t commCheckAsync(fcComm* comm);

}  // namespace fc
