#include "core/stream_fork.h"

#include "core/result.h"

namespace fc {

StreamFork::~StreamFork() {
  // The owner synchronised the device first; destroying is then just bookkeeping.
  for (cudaStream_t s : streams_) cudaStreamDestroy(s);
  for (cudaEvent_t e : joinEvents_) cudaEventDestroy(e);
  if (forkEvent_) cudaEventDestroy(forkEvent_);
}

fcResult_t StreamFork::init(int n) {
  // Timing-free events are the cheap kind, and the only kind a capture may record.
  FC_CUDA_CHECK(cudaEventCreateWithFlags(&forkEvent_, cudaEventDisableTiming));
  for (int i = 0; i < n; ++i) {
    cudaStream_t s = nullptr;
    cudaEvent_t e = nullptr;
    // Non-blocking: no implicit ordering against the legacy default stream, which
    // the caller's stream may not have either.
    FC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    streams_.push_back(s);
    FC_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    joinEvents_.push_back(e);
  }
  return fcSuccess;
}

fcResult_t StreamFork::fork(cudaStream_t parent, int n) {
  FC_CUDA_CHECK(cudaEventRecord(forkEvent_, parent));
  for (int i = 0; i < n; ++i) FC_CUDA_CHECK(cudaStreamWaitEvent(streams_[size_t(i)], forkEvent_, 0));
  return fcSuccess;
}

fcResult_t StreamFork::join(cudaStream_t parent, int n) {
  for (int i = 0; i < n; ++i) {
    FC_CUDA_CHECK(cudaEventRecord(joinEvents_[size_t(i)], streams_[size_t(i)]));
    FC_CUDA_CHECK(cudaStreamWaitEvent(parent, joinEvents_[size_t(i)], 0));
  }
  return fcSuccess;
}

}  // namespace fc
