#include "core/copy_queue.h"

#include "core/driver.h"
#include "core/result.h"

namespace fc {

CopyQueue::~CopyQueue() {
  // The owner synchronised the device first; destroying is then just bookkeeping.
  for (cudaEvent_t e : toCopy_)
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : toParent_)
    if (e) cudaEventDestroy(e);
  if (stream_) cudaStreamDestroy(stream_);
}

fcResult_t CopyQueue::init() {
  // Non-blocking: no implicit ordering against the legacy default stream, which
  // the caller's stream may not have either.
  FC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  // Timing-free events are the cheap kind.
  for (int i = 0; i < kSlots; ++i) {
    FC_CUDA_CHECK(cudaEventCreateWithFlags(&toCopy_[i], cudaEventDisableTiming));
    FC_CUDA_CHECK(cudaEventCreateWithFlags(&toParent_[i], cudaEventDisableTiming));
  }
  return fcSuccess;
}

fcResult_t CopyQueue::after(cudaStream_t parent, size_t tag) {
  cudaEvent_t e = toCopy_[tag % kSlots];
  FC_CUDA_CHECK(cudaEventRecord(e, parent));
  FC_CUDA_CHECK(cudaStreamWaitEvent(stream_, e, 0));
  return fcSuccess;
}

fcResult_t CopyQueue::mark(size_t tag) {
  FC_CUDA_CHECK(cudaEventRecord(toParent_[tag % kSlots], stream_));
  return fcSuccess;
}

fcResult_t CopyQueue::waitMark(cudaStream_t parent, size_t tag) {
  FC_CUDA_CHECK(cudaStreamWaitEvent(parent, toParent_[tag % kSlots], 0));
  return fcSuccess;
}

fcResult_t CopyQueue::signal(uint32_t* flag, uint32_t value) {
  FC_CU_CHECK(cuStreamWriteValue32(reinterpret_cast<CUstream>(stream_), reinterpret_cast<CUdeviceptr>(flag), value,
                                   CU_STREAM_WRITE_VALUE_DEFAULT));
  return fcSuccess;
}

}  // namespace fc
