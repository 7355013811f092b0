// Device memory private to one rank for the fused ops' intermediate results (the
// gathered A of fcAllGatherMatmul, the fp32 partial products of
// fcMatmulReduceScatter), one per channel. A channel runs its ops one at a time, in
// issue order (comm/ops.cc), so one buffer serves every op of that channel.
//
// It grows, never on the hot path: once per new largest need, outside stream
// capture. A grown buffer replaces the current one, but the old one stays allocated
// until the communicator is destroyed: work already enqueued, and graphs already
// captured, still point at it. Growth goes by powers of two, so the buffers kept
// add up to less than the current one.
#pragma once

#include <cstddef>
#include <vector>

#include "fusedcomm.h"

namespace fc {

class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch();  // the device must be idle (the communicator synchronised it)

  void* ptr() const { return bufs_.empty() ? nullptr : bufs_.back(); }
  size_t bytes() const { return bytes_; }
  // Everything ever allocated, the current buffer included.
  size_t allocatedBytes() const { return allocated_; }

  // Make the current buffer at least `bytes` long (cudaMalloc on the current device).
  fcResult_t grow(size_t bytes);

 private:
  std::vector<void*> bufs_;  // the last one is current
  size_t bytes_ = 0;
  size_t allocated_ = 0;
};

}  // namespace fc
