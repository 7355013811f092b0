#include "bootstrap/unique_id.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "bootstrap/host.h"
#include "core/result.h"

namespace fc {
namespace {

uint64_t checksumOf(const UniqueIdBody& b) { return fnv1a(&b, offsetof(UniqueIdBody, checksum)); }

uint64_t hostChecksumOf(const UniqueIdBody& b) {
  return fnv1a(&b.hostMagic, offsetof(UniqueIdBody, hostChecksum) - offsetof(UniqueIdBody, hostMagic));
}

fcResult_t fillRandom(void* buf, size_t n) {
  uint8_t* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return setError(fcSystemError, "getrandom: %s", strerror(errno));
    }
    p += r;
    n -= size_t(r);
  }
  return fcSuccess;
}

}  // namespace

uint64_t fnv1a(const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

fcResult_t makeUniqueId(fcUniqueId* id) {
  UniqueIdBody b;
  memset(&b, 0, sizeof b);
  b.magic = UniqueIdBody::kMagic;
  b.version = UniqueIdBody::kVersion;
  FC_CHECK(fillRandom(b.name, sizeof b.name));
  FC_CHECK(fillRandom(b.secret, sizeof b.secret));
  b.creatorPid = int32_t(getpid());
  b.checksum = checksumOf(b);
  const HostId host = thisHost();
  b.hostMagic = UniqueIdBody::kHostMagic;
  memcpy(b.hostName, host.name, sizeof b.hostName - 1);  // NUL-padded: cut, still terminated
  b.hostHash = host.hash;
  b.hostChecksum = hostChecksumOf(b);
  memset(id, 0, sizeof *id);
  memcpy(id->internal, &b, sizeof b);
  return fcSuccess;
}

fcResult_t parseUniqueId(const fcUniqueId& id, UniqueIdBody* body) {
  memcpy(body, id.internal, sizeof *body);
  if (body->magic != UniqueIdBody::kMagic)
    return setError(fcInvalidArgument, "unique id: bad magic 0x%08x (not made by fcGetUniqueId?)",
                    body->magic);
  if (body->version != UniqueIdBody::kVersion)
    return setError(fcInvalidArgument, "unique id: format version %u, this library reads %u",
                    body->version, UniqueIdBody::kVersion);
  if (body->checksum != checksumOf(*body))
    return setError(fcInvalidArgument, "unique id: checksum mismatch (corrupted in transit?)");
  if (body->hasCreatorHost() &&
      (body->hostChecksum != hostChecksumOf(*body) || memchr(body->hostName, 0, sizeof body->hostName) == nullptr))
    body->hostMagic = 0;
  return fcSuccess;
}

std::string rendezvousName(const UniqueIdBody& body) {
  static const char hex[] = "0123456789abcdef";
  std::string s = "fusedcomm.";
  for (uint8_t c : body.name) {
    s += hex[c >> 4];
    s += hex[c & 15];
  }
  return s;
}

}  // namespace fc
