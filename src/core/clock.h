// Monotonic deadlines for every blocking host-side wait.
#pragma once

#include <time.h>

#include <cstdint>

namespace fc {

inline uint64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

class Deadline {
 public:
  static Deadline afterMs(uint64_t ms) { return Deadline(nowNs() + ms * 1000000ull); }
  bool expired() const { return nowNs() >= at_; }
  // Milliseconds left, rounded up, for poll(); 0 when expired.
  int msLeft() const {
    uint64_t now = nowNs();
    if (now >= at_) return 0;
    uint64_t ms = (at_ - now + 999999) / 1000000;
    return ms > 0x7fffffff ? 0x7fffffff : int(ms);
  }

 private:
  explicit Deadline(uint64_t at) : at_(at) {}
  uint64_t at_;
};

}  // namespace fc
