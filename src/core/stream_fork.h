// Internal streams that an operation forks onto from the caller's stream and joins
// back into, so that several copy-engine transfers run at once. Only events order
// them against the caller's stream: that is what CUDA-graph capture records as
// graph edges, so the same calls work eagerly and under capture (the internal
// streams join the capture through the fork event and leave it at the join).
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "fusedcomm.h"

namespace fc {

class StreamFork {
 public:
  StreamFork() = default;
  StreamFork(const StreamFork&) = delete;
  StreamFork& operator=(const StreamFork&) = delete;
  ~StreamFork();

  // Create `n` non-blocking streams on the current device (and their events).
  fcResult_t init(int n);

  int size() const { return int(streams_.size()); }
  cudaStream_t stream(int i) const { return streams_[size_t(i)]; }

  // Work enqueued on streams [0, n) from now on starts after everything enqueued on
  // `parent` so far.
  fcResult_t fork(cudaStream_t parent, int n);

  // Work enqueued on `parent` from now on starts after everything enqueued on
  // streams [0, n) so far.
  fcResult_t join(cudaStream_t parent, int n);

 private:
  std::vector<cudaStream_t> streams_;
  cudaEvent_t forkEvent_ = nullptr;
  std::vector<cudaEvent_t> joinEvents_;
};

}  // namespace fc
