// Intra-node bootstrap: a star of AF_UNIX connections centred on rank 0.
//
// Rendezvous: rank 0 listens on the abstract socket named by the unique id; every
// other rank connects and sends HELLO {secret, rank, nranks}. Rank 0 accepts only
// peers of the same uid (SO_PEERCRED) that present the id's secret, for a rank it
// has not seen, with the same nranks; it rejects anything else and keeps waiting.
// When all ranks are in, rank 0 answers WELCOME; if the deadline passes first it
// sends ABORT naming the missing ranks to those that did arrive, so every rank
// fails with the same, clear message. Then every rank all-gathers every rank's host
// (host.h): ranks on several hosts all fail with fcInvalidUsage naming them.
//
// After the rendezvous the connections stay open for small collectives
// (all-gather of blobs, fd exchange with SCM_RIGHTS relayed by rank 0, barrier).
// Every wait has the communicator's deadline. A failure on rank 0 closes all
// connections, so the other ranks fail fast instead of waiting for the deadline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "bootstrap/unique_id.h"
#include "fusedcomm.h"

namespace fc {

class Bootstrap {
 public:
  static constexpr int kMaxRanks = 64;

  // Join the rendezvous of `id` as `rank` of `nranks`; blocks until all ranks have
  // joined or timeoutMs passed (fcTimeout naming the missing ranks; fcInvalidUsage
  // for a rank of another host than the id's creator that never reached a rank 0).
  // Ranks on several hosts: fcInvalidUsage on every rank, naming the hosts.
  static fcResult_t create(const UniqueIdBody& id, int rank, int nranks, uint64_t timeoutMs,
                           std::unique_ptr<Bootstrap>* out);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // all[r*bytes, (r+1)*bytes) = rank r's `mine`; `bytes` must agree on all ranks.
  fcResult_t allGather(const void* mine, void* all, size_t bytes);

  // Each rank gives n descriptors (1 <= n <= 4); afterwards all[r*n + i] is a new
  // descriptor for rank r's i-th one (owned by the caller), and -1 for r == rank.
  fcResult_t allGatherFds(const int* mine, int n, int* all);

  fcResult_t barrier();

 private:
  Bootstrap(int rank, int nranks, uint64_t timeoutMs);
  fcResult_t rendezvousRoot(const UniqueIdBody& id);
  fcResult_t rendezvousPeer(const UniqueIdBody& id);
  fcResult_t fail(fcResult_t res);  // rank 0: drop every connection so peers fail fast

  int rank_;
  int nranks_;
  uint64_t timeoutMs_;
  uint32_t seq_ = 0;        // collective sequence number: catches ranks calling out of step
  bool broken_ = false;
  int rootFd_ = -1;         // ranks > 0: connection to rank 0
  std::vector<int> peers_;  // rank 0: peers_[r] = connection to rank r (r > 0)
};

}  // namespace fc
