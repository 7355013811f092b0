#include "bootstrap/bootstrap.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bootstrap/host.h"
#include "bootstrap/socket.h"
#include "core/log.h"
#include "core/result.h"

namespace fc {
namespace {

constexpr uint32_t kMsgMagic = 0x53424346;  // "FCBS"
enum MsgType : uint32_t { kHello = 1, kWelcome, kReject, kAbort, kData, kFds };
enum RejectReason : uint32_t { kBadSecret = 1, kBadRank, kDuplicateRank, kBadWorld };

// Every message starts with this header; payload (`bytes`) follows.
struct MsgHeader {
  uint32_t magic;
  uint32_t type;
  uint32_t arg;  // seq for collectives, reason for REJECT
  uint32_t pad;
  uint64_t bytes;
};

struct Hello {
  uint8_t secret[16];
  int32_t rank;
  int32_t nranks;
  int32_t pid;
  int32_t pad;
};

fcResult_t sendMsg(int fd, uint32_t type, uint32_t arg, const void* payload, uint64_t bytes,
                   Deadline d) {
  MsgHeader h{kMsgMagic, type, arg, 0, bytes};
  FC_CHECK(net::sendAll(fd, &h, sizeof h, d));
  if (bytes > 0) FC_CHECK(net::sendAll(fd, payload, bytes, d));
  return fcSuccess;
}

// Receive a header and check it is `type` with `arg` and `bytes` of payload.
fcResult_t recvHeader(int fd, MsgHeader* h, Deadline d) {
  FC_CHECK(net::recvAll(fd, h, sizeof *h, d));
  if (h->magic != kMsgMagic) return setError(fcRemoteError, "bad message magic 0x%08x", h->magic);
  return fcSuccess;
}

fcResult_t expectMsg(int fd, uint32_t type, uint32_t arg, void* payload, uint64_t bytes,
                     Deadline d) {
  MsgHeader h;
  FC_CHECK(recvHeader(fd, &h, d));
  if (h.type != type || h.arg != arg || h.bytes != bytes)
    return setError(fcRemoteError,
                    "out-of-step collective: got message type %u seq %u of %llu bytes, "
                    "expected type %u seq %u of %llu bytes (do all ranks make the same calls?)",
                    h.type, h.arg, (unsigned long long)h.bytes, type, arg,
                    (unsigned long long)bytes);
  if (bytes > 0) FC_CHECK(net::recvAll(fd, payload, bytes, d));
  return fcSuccess;
}

std::string rankList(const std::vector<bool>& present, bool want) {
  std::string s;
  for (size_t r = 0; r < present.size(); ++r)
    if (present[r] == want) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s.empty() ? "none" : s;
}

const char* rejectText(uint32_t reason) {
  switch (reason) {
    case kBadSecret: return "it did not present the unique id's secret (a unique id of another run?)";
    case kBadRank: return "its rank is out of range";
    case kDuplicateRank: return "another process already joined with the same rank";
    case kBadWorld: return "its nranks differs from rank 0's";
    default: return "unknown reason";
  }
}

// Ends the timeouts of the rendezvous: a rank started on another host never arrives.
constexpr const char* kOtherHostHint =
    " (a rank on another host can never join: a communicator covers the GPUs of one node)";

bool secretEqual(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;  // constant time: no early exit that leaks a prefix length
  for (int i = 0; i < 16; ++i) diff |= uint8_t(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

Bootstrap::Bootstrap(int rank, int nranks, uint64_t timeoutMs)
    : rank_(rank), nranks_(nranks), timeoutMs_(timeoutMs), peers_(size_t(nranks), -1) {}

Bootstrap::~Bootstrap() {
  if (rootFd_ >= 0) close(rootFd_);
  for (int fd : peers_)
    if (fd >= 0) close(fd);
}

fcResult_t Bootstrap::create(const UniqueIdBody& id, int rank, int nranks, uint64_t timeoutMs,
                             std::unique_ptr<Bootstrap>* out) {
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks)
    return setError(fcInvalidArgument, "bootstrap: rank %d of nranks %d is invalid", rank, nranks);
  std::unique_ptr<Bootstrap> b(new Bootstrap(rank, nranks, timeoutMs));
  fcResult_t res = rank == 0 ? b->rendezvousRoot(id) : b->rendezvousPeer(id);
  // Every rank gets every rank's host and refuses several with the same message.
  // A refusal closes our connections as `b` goes (the listening socket is closed
  // at the end of the rendezvous already).
  if (res == fcSuccess && nranks > 1) {
    const HostId mine = thisHost();
    std::vector<HostId> hosts(static_cast<size_t>(nranks));
    res = b->allGather(&mine, hosts.data(), sizeof mine);
    if (res == fcSuccess) res = checkOneHost(hosts);
  }
  if (res != fcSuccess) return addContext(res, "bootstrap rank %d/%d", rank, nranks);
  *out = std::move(b);
  return fcSuccess;
}

fcResult_t Bootstrap::rendezvousRoot(const UniqueIdBody& id) {
  if (nranks_ == 1) return fcSuccess;
  const std::string name = rendezvousName(id);
  int listenFd;
  FC_CHECK(net::listenAbstract(name, &listenFd));
  Deadline deadline = Deadline::afterMs(timeoutMs_);
  std::vector<bool> present(size_t(nranks_), false);
  present[0] = true;
  int missing = nranks_ - 1;
  uid_t myUid = getuid();
  fcResult_t res = fcSuccess;
  while (missing > 0) {
    int fd;
    res = net::acceptOne(listenFd, deadline, &fd);
    if (res == fcTimeout) {
      // Tell the ranks that did come which ones did not, then give up.
      std::string miss = rankList(present, false);
      uint64_t mask = 0;
      for (int r = 0; r < nranks_; ++r)
        if (!present[size_t(r)]) mask |= 1ull << r;
      for (int r = 1; r < nranks_; ++r)
        if (peers_[size_t(r)] >= 0)
          sendMsg(peers_[size_t(r)], kAbort, 0, &mask, sizeof mask, Deadline::afterMs(1000));
      res = setError(fcTimeout,
                     "timed out after %llu ms waiting for rank(s) %s of %d to join "
                     "(joined: %s); set FC_TIMEOUT_MS to wait longer%s",
                     (unsigned long long)timeoutMs_, miss.c_str(), nranks_,
                     rankList(present, true).c_str(), kOtherHostHint);
      break;
    }
    if (res != fcSuccess) break;
    // A connection that does not authenticate within 2 s (or the deadline) is dropped.
    uid_t uid;
    Hello hello;
    uint64_t helloMs = deadline.msLeft() < 2000 ? uint64_t(deadline.msLeft()) : 2000;
    if (net::peerUid(fd, &uid) != fcSuccess || uid != myUid ||
        expectMsg(fd, kHello, 0, &hello, sizeof hello, Deadline::afterMs(helloMs)) != fcSuccess) {
      log(LogLevel::Warn, "bootstrap: dropped a connection that is not a peer (uid %d)", int(uid));
      close(fd);
      clearError();
      continue;
    }
    uint32_t reason = 0;
    if (!secretEqual(hello.secret, id.secret)) reason = kBadSecret;
    else if (hello.nranks != nranks_) reason = kBadWorld;
    else if (hello.rank <= 0 || hello.rank >= nranks_) reason = kBadRank;
    else if (present[size_t(hello.rank)]) reason = kDuplicateRank;
    if (reason != 0) {
      log(LogLevel::Warn, "bootstrap: rejected pid %d claiming rank %d/%d: %s", hello.pid,
          hello.rank, hello.nranks, rejectText(reason));
      sendMsg(fd, kReject, reason, nullptr, 0, Deadline::afterMs(1000));
      close(fd);
      clearError();
      continue;
    }
    present[size_t(hello.rank)] = true;
    peers_[size_t(hello.rank)] = fd;
    --missing;
    FC_TRACE("bootstrap: rank %d (pid %d) joined", hello.rank, hello.pid);
  }
  close(listenFd);  // the name is free again as soon as the rendezvous is over
  if (res != fcSuccess) return fail(res);
  for (int r = 1; r < nranks_; ++r)
    if ((res = sendMsg(peers_[size_t(r)], kWelcome, 0, nullptr, 0, deadline)) != fcSuccess)
      return fail(addContext(res, "welcoming rank %d", r));
  return fcSuccess;
}

fcResult_t Bootstrap::rendezvousPeer(const UniqueIdBody& id) {
  Deadline deadline = Deadline::afterMs(timeoutMs_);
  const std::string name = rendezvousName(id);
  fcResult_t res = net::connectAbstract(name, deadline, &rootFd_);
  if (res == fcTimeout && id.hasCreatorHost()) {
    // Rank 0 normally runs where the id was made; from another host it is out of reach.
    const HostId here = thisHost();
    HostId creator{};
    creator.hash = id.hostHash;
    snprintf(creator.name, sizeof creator.name, "%s", id.hostName);
    if (creator.hash != here.hash)
      return setError(fcInvalidUsage,
                      "timed out after %llu ms: this rank runs on host %s, its unique id was made on "
                      "host %s, and no rank 0 opened the rendezvous on this host (the ranks meet "
                      "through a Unix socket of the node: a rank 0 on another host is out of reach): %s",
                      (unsigned long long)timeoutMs_, hostLabel(here).c_str(), hostLabel(creator).c_str(),
                      kOneNodeAdvice);
  }
  if (res == fcTimeout)
    return setError(fcTimeout,
                    "timed out after %llu ms: rank 0 never opened the rendezvous, or it had "
                    "already completed without us (is rank 0 running, with the same unique id, "
                    "and is every rank number used once?)",
                    (unsigned long long)timeoutMs_);
  FC_CHECK(res);
  uid_t uid;
  FC_CHECK(net::peerUid(rootFd_, &uid));
  if (uid != getuid())
    return setError(fcRemoteError, "the rendezvous socket is owned by uid %d, not ours (%d)",
                    int(uid), int(getuid()));
  Hello hello{};
  memcpy(hello.secret, id.secret, sizeof hello.secret);
  hello.rank = rank_;
  hello.nranks = nranks_;
  hello.pid = int32_t(getpid());
  FC_CHECK(sendMsg(rootFd_, kHello, 0, &hello, sizeof hello, deadline));
  // Rank 0 answers when everyone is in, or with ABORT at its own deadline; allow a
  // little grace beyond ours so that its explanation arrives before we give up.
  MsgHeader h;
  res = recvHeader(rootFd_, &h, Deadline::afterMs(timeoutMs_ + 2000));
  if (res == fcTimeout)
    return setError(fcTimeout, "timed out after %llu ms waiting for rank 0 to complete the rendezvous",
                    (unsigned long long)timeoutMs_);
  FC_CHECK(res);
  if (h.type == kWelcome) return fcSuccess;
  if (h.type == kReject)
    return setError(h.arg == kBadSecret ? fcInvalidArgument : fcRemoteError,
                    "rank 0 rejected this rank: %s", rejectText(h.arg));
  if (h.type == kAbort && h.bytes == sizeof(uint64_t)) {
    uint64_t mask = 0;
    FC_CHECK(net::recvAll(rootFd_, &mask, sizeof mask, Deadline::afterMs(1000)));
    std::vector<bool> present(static_cast<size_t>(nranks_));
    for (int r = 0; r < nranks_; ++r) present[size_t(r)] = !((mask >> r) & 1);
    return setError(fcTimeout, "timed out after %llu ms: rank(s) %s of %d never joined%s",
                    (unsigned long long)timeoutMs_, rankList(present, false).c_str(), nranks_,
                    kOtherHostHint);
  }
  return setError(fcRemoteError, "unexpected message type %u from rank 0", h.type);
}

fcResult_t Bootstrap::fail(fcResult_t res) {
  broken_ = true;
  for (int& fd : peers_)
    if (fd >= 0) close(fd), fd = -1;
  if (rootFd_ >= 0) close(rootFd_), rootFd_ = -1;
  return res;
}

fcResult_t Bootstrap::allGather(const void* mine, void* all, size_t bytes) {
  if (broken_) return setError(fcRemoteError, "bootstrap: connections already failed");
  const uint32_t seq = ++seq_;
  char* out = static_cast<char*>(all);
  memmove(out + size_t(rank_) * bytes, mine, bytes);
  if (nranks_ == 1) return fcSuccess;
  Deadline d = Deadline::afterMs(timeoutMs_);
  fcResult_t res;
  if (rank_ == 0) {
    for (int r = 1; r < nranks_; ++r)
      if ((res = expectMsg(peers_[size_t(r)], kData, seq, out + size_t(r) * bytes, bytes, d)) != fcSuccess)
        return fail(addContext(res, "bootstrap all-gather #%u, receiving from rank %d", seq, r));
    for (int r = 1; r < nranks_; ++r)
      if ((res = sendMsg(peers_[size_t(r)], kData, seq, out, bytes * size_t(nranks_), d)) != fcSuccess)
        return fail(addContext(res, "bootstrap all-gather #%u, sending to rank %d", seq, r));
    return fcSuccess;
  }
  // Rank 0's reply includes our own slot: receive into a copy so `mine` may alias `all`.
  std::vector<char> tmp(bytes * size_t(nranks_));
  if ((res = sendMsg(rootFd_, kData, seq, mine, bytes, d)) != fcSuccess ||
      (res = expectMsg(rootFd_, kData, seq, tmp.data(), tmp.size(), d)) != fcSuccess)
    return fail(addContext(res, "bootstrap all-gather #%u with rank 0", seq));
  memcpy(out, tmp.data(), tmp.size());
  return fcSuccess;
}

fcResult_t Bootstrap::allGatherFds(const int* mine, int n, int* all) {
  if (broken_) return setError(fcRemoteError, "bootstrap: connections already failed");
  if (n < 1 || n > 4) return setError(fcInternalError, "allGatherFds: n=%d", n);
  const uint32_t seq = ++seq_;
  for (int i = 0; i < n * nranks_; ++i) all[i] = -1;
  if (nranks_ == 1) return fcSuccess;
  Deadline d = Deadline::afterMs(timeoutMs_);
  fcResult_t res = fcSuccess;
  if (rank_ == 0) {
    // Collect every rank's descriptors, then relay to each rank the others' ones.
    for (int r = 1; r < nranks_ && res == fcSuccess; ++r) {
      res = expectMsg(peers_[size_t(r)], kFds, seq, nullptr, 0, d);
      if (res == fcSuccess) res = net::recvFds(peers_[size_t(r)], all + r * n, n, d);
      if (res != fcSuccess) addContext(res, "bootstrap fd exchange #%u, receiving from rank %d", seq, r);
    }
    for (int dst = 1; dst < nranks_ && res == fcSuccess; ++dst) {
      res = sendMsg(peers_[size_t(dst)], kFds, seq, nullptr, 0, d);
      for (int src = 0; src < nranks_ && res == fcSuccess; ++src)
        if (src != dst) res = net::sendFds(peers_[size_t(dst)], src == 0 ? mine : all + src * n, n, d);
      if (res != fcSuccess) addContext(res, "bootstrap fd exchange #%u, sending to rank %d", seq, dst);
    }
    if (res != fcSuccess) {
      for (int i = 0; i < n * nranks_; ++i)
        if (all[i] >= 0) close(all[i]), all[i] = -1;
      return fail(res);
    }
    return fcSuccess;
  }
  res = sendMsg(rootFd_, kFds, seq, nullptr, 0, d);
  if (res == fcSuccess) res = net::sendFds(rootFd_, mine, n, d);
  if (res == fcSuccess) res = expectMsg(rootFd_, kFds, seq, nullptr, 0, d);
  for (int src = 0; src < nranks_ && res == fcSuccess; ++src)
    if (src != rank_) res = net::recvFds(rootFd_, all + src * n, n, d);
  if (res != fcSuccess) {
    for (int i = 0; i < n * nranks_; ++i)
      if (all[i] >= 0) close(all[i]), all[i] = -1;
    return fail(addContext(res, "bootstrap fd exchange #%u with rank 0", seq));
  }
  return fcSuccess;
}

fcResult_t Bootstrap::barrier() {
  char dummy = 0;
  std::vector<char> all(static_cast<size_t>(nranks_));
  return allGather(&dummy, all.data(), 1);
}

}  // namespace fc
