// The layout behind fcUniqueId's 128 opaque bytes.
#pragma once

#include <cstddef>
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
  // Appended in 0.2.x, in the id's last 64 bytes (ids of older libraries have zeros
  // there, and older libraries ignore them): the host that made the id, so that a
  // rank of another host, which can never reach a rank 0 there, says so at its
  // deadline. Informational only: a record that does not check out is ignored.
  static constexpr uint32_t kHostMagic = 0x54534f48;  // "HOST"
  uint32_t hostMagic;  // kHostMagic when the record is set
  char hostName[44];   // HostId::name, truncated
  uint64_t hostHash;   // HostId::hash
  uint64_t hostChecksum;  // FNV-1a of hostMagic .. hostHash

  bool hasCreatorHost() const { return hostMagic == kHostMagic; }
};
static_assert(sizeof(UniqueIdBody) == FC_UNIQUE_ID_BYTES, "unique id body: 128 bytes");
static_assert(offsetof(UniqueIdBody, hostMagic) == 64, "the host record is appended after the first 64 bytes");

// FNV-1a, 64 bits.
uint64_t fnv1a(const void* data, size_t n);

// Fill a fresh id (getrandom for name and secret; this host as the creator's).
fcResult_t makeUniqueId(fcUniqueId* id);

// Validate magic, version and checksum; fcInvalidArgument when any is off. A host
// record that does not check out is cleared (hasCreatorHost() false).
fcResult_t parseUniqueId(const fcUniqueId& id, UniqueIdBody* body);

// The abstract socket name rank 0 listens on: "fusedcomm.<hex of name>".
std::string rendezvousName(const UniqueIdBody& body);

}  // namespace fc
