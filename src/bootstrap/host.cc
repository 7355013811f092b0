#include "bootstrap/host.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bootstrap/unique_id.h"
#include "core/result.h"

namespace fc {

const char* const kOneNodeAdvice =
    "a communicator covers the GPUs of one node: make one per node, of that node's ranks "
    "(Python: fusedcomm.Communicator.for_node), and communicate across nodes through NCCL or "
    "torch.distributed (docs/api.md, \"Across nodes\"); hosts are told apart by hostname and "
    "boot id, or by FC_HOST_ID where it is set";

namespace {

// The first n - 1 bytes of src into a zeroed dst of n bytes (NUL-terminated).
template <size_t n>
void copyName(char (&dst)[n], const char* src) {
  memcpy(dst, src, strnlen(src, n - 1));
}

// "rank 2", "ranks 0-1", "ranks 0,2-3".
std::string rankRanges(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(ranks[i]);
    if (j > i) s += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return (ranks.size() == 1 ? "rank " : "ranks ") + s;
}

}  // namespace

HostId thisHost() {
  HostId h;
  memset(&h, 0, sizeof h);
  std::string key;
  const char* override = getenv("FC_HOST_ID");
  if (override != nullptr && *override != '\0') {
    copyName(h.name, override);
    key = std::string("FC_HOST_ID=") + override;
  } else {
    char name[256] = {0};
    gethostname(name, sizeof name - 1);
    copyName(h.name, name);
    if (FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r")) {
      if (fgets(h.bootId, int(sizeof h.bootId), f) == nullptr) h.bootId[0] = '\0';
      fclose(f);
      h.bootId[strcspn(h.bootId, "\n")] = '\0';
    }
    key = std::string(name) + "\n" + h.bootId;
  }
  h.hash = fnv1a(key.data(), key.size());
  return h;
}

std::string hostLabel(const HostId& h, bool withBootId) {
  std::string s = "'" + std::string(h.name, strnlen(h.name, sizeof h.name)) + "'";
  if (withBootId && h.bootId[0] != '\0')
    s += " (boot id " + std::string(h.bootId, strnlen(h.bootId, 8)) + ")";
  return s;
}

fcResult_t checkOneHost(const std::vector<HostId>& all) {
  // The hosts in order of their lowest rank, with their ranks.
  std::vector<size_t> first;  // index into `all` of each host's lowest rank
  std::vector<std::vector<int>> ranks;
  for (size_t r = 0; r < all.size(); ++r) {
    size_t k = 0;
    while (k < first.size() && all[first[k]].hash != all[r].hash) ++k;
    if (k == first.size()) first.push_back(r), ranks.emplace_back();
    ranks[k].push_back(int(r));
  }
  if (first.size() <= 1) return fcSuccess;
  constexpr size_t kListed = 4;  // the message stays well within fcGetLastError's 1 KiB
  std::string hosts;
  for (size_t k = 0; k < first.size() && k < kListed; ++k) {
    bool sameName = false;
    for (size_t o = 0; o < first.size(); ++o)
      sameName |= o != k && strncmp(all[first[o]].name, all[first[k]].name, sizeof all[0].name) == 0;
    hosts += (k == 0 ? "" : ", ") + rankRanges(ranks[k]) + " on " + hostLabel(all[first[k]], sameName);
  }
  if (first.size() > kListed) hosts += ", and " + std::to_string(first.size() - kListed) + " more hosts";
  return setError(fcInvalidUsage, "the ranks are on %zu hosts (%s): %s", first.size(), hosts.c_str(),
                  kOneNodeAdvice);
}

}  // namespace fc
