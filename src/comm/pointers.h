// Buffer argument checks shared by every entry point that takes buffers (src/api):
// first whether a count or shape can describe a buffer at all, then, before anything
// is enqueued, whether each buffer is memory the communicator's GPU can address.
// A kernel or copy that meets a host or freed pointer faults, and an illegal address
// loses the process's CUDA context: every later call of the process fails. Refusing
// the argument keeps the communicator (and the process) usable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "fusedcomm.h"

struct fcComm;

namespace fc {

// The largest buffer an entry point accepts: 2^48 bytes (256 TiB). No GPU holds that
// much and no address space on the node maps a range that large (x86-64 user space
// is 47 bits, a GPU's virtual addresses 49): a larger count is a computation that
// overflowed, or garbage.
constexpr uint64_t kMaxBufferBytes = 1ull << 48;

// Whether `elems` elements of `elemBytes` (> 0) starting at `p` can be a buffer: at
// most kMaxBufferBytes, and p + bytes does not wrap around the address space. Checked
// before any overlap test, whose arithmetic assumes exactly this.
bool bufferFits(const void* p, size_t elems, size_t elemBytes);

// One buffer argument of an entry point: its name for the message ("sendbuff", "A")
// and its address (NULL: an optional argument not given, skipped).
struct BufferArg {
  const char* name;
  const void* ptr;
};

// Each buffer must be memory that `comm`'s GPU can address: fcMemAlloc memory of
// `comm`, device memory of comm's GPU, or managed memory. Host memory (pageable or
// pinned), another GPU's memory and freed memory give fcInvalidArgument naming `fn`
// and the argument. Skipped when FC_CHECK_POINTERS=0. Only the start of each buffer
// is looked at (its extent is the caller's contract, as with NCCL). Host code, no
// stream operation and no allocation: safe during CUDA graph capture, where it runs
// once, at capture time. Also reports the communicator's sticky or in-progress state
// first (commCheckAsync), since the comm's device is only known once init is done.
fcResult_t checkBuffers(fcComm* comm, const char* fn, std::initializer_list<BufferArg> buffers);

}  // namespace fc
