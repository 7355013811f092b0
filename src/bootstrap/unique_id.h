// The layout behind fcUniqueId's 128 opaque bytes.
#pragma once

#include <cstdint>
#include <string>

#include "fusedcomm.h"

namespace fc {

struct UniqueIdBody {
  static constexpr uint32_t kMagic = 0x44494346;  // "FCID"
  static constexpr uint32_t kVersion = 1;
  uint32_t magic;
  uint32_t version;
  uint8_t name[16];    // random: names the rendezvous socket; not secret
  uint8_t secret[16];  // random: every rank proves it holds it; never sent in the clear to a non-peer
  int32_t creatorPid;  // informational (logs)
  uint32_t reserved[3];
  uint64_t checksum;   // FNV-1a of the bytes above: catches garbage and truncation
};
static_assert(sizeof(UniqueIdBody) <= FC_UNIQUE_ID_BYTES, "unique id body too large");

// Fill a fresh id (getrandom for name and secret).
fcResult_t makeUniqueId(fcUniqueId* id);

// Validate magic, version and checksum; fcInvalidArgument when any is off.
fcResult_t parseUniqueId(const fcUniqueId& id, UniqueIdBody* body);

// The abstract socket name rank 0 listens on: "fusedcomm.<hex of name>".
std::string rendezvousName(const UniqueIdBody& body);

}  // namespace fc
