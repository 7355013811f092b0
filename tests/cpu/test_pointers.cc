// The buffer argument checks (src/comm/pointers.h) without a GPU: the size limit and
// its wrap-around test, and what checkBuffers does before it asks CUDA anything (the
// refusals of host, pinned, freed and other-GPU memory are tested in tests/gpu).
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "comm/comm.h"
#include "comm/pointers.h"
#include "core/result.h"

using Catch::Matchers::ContainsSubstring;

namespace {

const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }

}  // namespace

TEST_CASE("bufferFits: at most 2^48 bytes, and no wrap past the end of the address space", "[pointers]") {
  const uintptr_t p = 0x7f0000000000u;
  CHECK(fc::kMaxBufferBytes == (uint64_t(1) << 48));
  CHECK(fc::bufferFits(at(p), 0, 2));
  CHECK(fc::bufferFits(at(p), 1, 4));
  CHECK(fc::bufferFits(at(p), (size_t(1) << 47), 2));       // exactly 2^48 bytes
  CHECK_FALSE(fc::bufferFits(at(p), (size_t(1) << 47) + 1, 2));
  CHECK_FALSE(fc::bufferFits(at(p), size_t(1) << 62, 2));    // issue 24: 2^62 bf16
  CHECK_FALSE(fc::bufferFits(at(p), SIZE_MAX, 4));           // elems * size overflows
  CHECK_FALSE(fc::bufferFits(at(p), SIZE_MAX / 2 + 1, 2));
  // Near the top of the address space: p + bytes must not wrap.
  const uintptr_t top = UINTPTR_MAX & ~uintptr_t(255);
  CHECK(fc::bufferFits(at(top), 255 / 4, 4));
  CHECK_FALSE(fc::bufferFits(at(top), 64, 4));
  CHECK(fc::bufferFits(nullptr, size_t(1) << 20, 4));
}

TEST_CASE("checkBuffers: communicator state first, NULLs skipped, FC_CHECK_POINTERS=0 skips the check",
          "[pointers]") {
  // A communicator as the checks see it: no init ran (no GPU here), so no device,
  // no symmetric memory and no error record.
  fcComm comm;
  comm.cudaDev = 0;
  int local = 0;
  std::string host(64, 'x');

  SECTION("a non-blocking init still running is reported before any buffer is looked at") {
    comm.asyncError.store(fcInProgress);
    CHECK(fc::checkBuffers(&comm, "fcAllReduce", {{"sendbuff", host.data()}}) == fcInProgress);
  }
  SECTION("a sticky error is reported first") {
    comm.asyncMessage = "rank 1 timed out";
    comm.asyncError.store(fcTimeout);
    CHECK(fc::checkBuffers(&comm, "fcAllReduce", {{"sendbuff", host.data()}}) == fcTimeout);
    CHECK_THAT(std::string(fc::lastError()), ContainsSubstring("timed out"));
  }
  SECTION("NULL (an optional argument not given) is not looked at") {
    CHECK(fc::checkBuffers(&comm, "fcAllGatherMatmul", {{"Agathered", nullptr}}) == fcSuccess);
  }
  SECTION("FC_CHECK_POINTERS=0: host memory passes unchecked (the caller's risk)") {
    comm.params.checkPointers = false;
    CHECK(fc::checkBuffers(&comm, "fcAllReduce", {{"sendbuff", host.data()}, {"recvbuff", &local}}) ==
          fcSuccess);
  }
  SECTION("on: host memory is refused, naming the function and the argument") {
    // With a GPU: fcInvalidArgument (host memory). Without a driver (CI) CUDA cannot
    // say what the pointer is: fcUnhandledCudaError. Either way, not accepted.
    const fcResult_t r = fc::checkBuffers(&comm, "fcAllReduce", {{"sendbuff", host.data()}});
    const std::string msg = fc::lastError();
    INFO(msg);
    CHECK(r != fcSuccess);
    CHECK_THAT(msg, ContainsSubstring("fcAllReduce"));
    CHECK_THAT(msg, ContainsSubstring("sendbuff"));
    if (r == fcInvalidArgument) CHECK_THAT(msg, ContainsSubstring("host memory"));
  }
  comm.magic = 0;
}
