// An internal stream for copy-engine transfers, ordered against the caller's stream
// only through events. Events are what CUDA-graph capture turns into graph edges,
// so the same calls work eagerly and under capture: the internal stream joins the
// capture at its first wait on a captured event and must be waited on by the
// caller's stream before the capture ends (every op does so before it returns).
//
// Events come in a ring of kSlots per direction, addressed by a tag (e.g. a pass
// number), because a pipeline records the next marker before the other side has
// waited on the previous one. cudaStreamWaitEvent uses the event's state at the
// time of the call, so a tag may be reused once its wait has been enqueued.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "fusedcomm.h"

namespace fc {

class CopyQueue {
 public:
  // Marks ahead of their waits: at most one per peer (kMaxRanks) plus one.
  static constexpr int kSlots = 17;

  CopyQueue() = default;
  CopyQueue(const CopyQueue&) = delete;
  CopyQueue& operator=(const CopyQueue&) = delete;
  ~CopyQueue();

  // Create the stream (non-blocking) and events on the current device.
  fcResult_t init();

  cudaStream_t stream() const { return stream_; }

  // Work enqueued on the copy stream from now on starts after everything enqueued
  // on `parent` so far.
  fcResult_t after(cudaStream_t parent, size_t tag);

  // Mark everything enqueued on the copy stream so far as `tag`...
  fcResult_t mark(size_t tag);
  // ...and make work enqueued on `parent` from now on wait for it.
  fcResult_t waitMark(cudaStream_t parent, size_t tag);

  // Once everything enqueued on the copy stream so far is done, store `value` into
  // the 32-bit word at `flag` (device memory), with a memory barrier first: a kernel
  // that sees the value also sees the copies' data (cuStreamWriteValue32).
  fcResult_t signal(uint32_t* flag, uint32_t value);

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t toCopy_[kSlots] = {};
  cudaEvent_t toParent_[kSlots] = {};
};

}  // namespace fc
