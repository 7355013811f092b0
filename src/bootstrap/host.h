// Which host a rank runs on. A communicator's ranks must all be on one node (they
// map each other's GPU memory and meet through a Unix socket of the node); the
// bootstrap all-gathers every rank's HostId right after the rendezvous and refuses a
// communicator whose ranks are on several hosts, on every rank, with one message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusedcomm.h"

namespace fc {

// A fixed-size blob (the bootstrap all-gathers it as bytes).
struct HostId {
  uint64_t hash;     // FNV-1a of the whole identity: same hash, same host
  char name[64];     // for messages: FC_HOST_ID, else the hostname (truncated)
  char bootId[40];   // /proc/sys/kernel/random/boot_id; "" under FC_HOST_ID or where unreadable
};

// This process's host: FC_HOST_ID where set and not empty (the whole identity: tests
// put ranks of one machine on "different hosts" with it, and containers of one
// machine that have different hostnames may declare one host), else the hostname and
// the boot id.
HostId thisHost();

// fcSuccess when every rank's HostId (`all`, in rank order) is the same host;
// otherwise fcInvalidUsage naming the hosts and their ranks, and what to do.
fcResult_t checkOneHost(const std::vector<HostId>& all);

// How a host appears in messages: 'name', and its boot id's first 8 characters when
// withBootId (where another host has the same name).
std::string hostLabel(const HostId& h, bool withBootId = false);

// What to do instead of one communicator over several hosts (ends every refusal).
extern const char* const kOneNodeAdvice;

}  // namespace fc
