// The Unix-socket bootstrap across real processes: rendezvous, all-gather, fd
// exchange, and the failure paths (wrong secret, missing rank, dead peer, duplicate
// rank, ranks on several hosts: "hosts" faked with FC_HOST_ID). Every rank is a forked child that runs the bootstrap and reports an exit
// code (the fcResult_t, or kCheckFailed) plus a message and a duration through a
// pipe; the parent asserts. Children never use Catch2 and leave with _exit. The
// parent reaps with a deadline and SIGKILLs stragglers, so a hang is a failure, not
// a stuck test.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/host.h"
#include "bootstrap/unique_id.h"
#include "core/result.h"

using Catch::Matchers::ContainsSubstring;
using fc::Bootstrap;
using fc::UniqueIdBody;

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point after(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Exit codes of a child: an fcResult_t (0..fcNumResults-1), or one of these.
constexpr int kCheckFailed = 100;  // the bootstrap succeeded but delivered wrong data
constexpr int kException = 101;

// What a child hands back besides its exit code.
struct Report {
  std::string msg;  // fc::lastError() or a description of the failed check
  double ms = -1;   // a duration the child measured (meaning depends on the test)
};

struct Result {
  bool exited = false;  // exited on its own (not killed, not by a signal)
  bool killed = false;  // still running at the deadline: SIGKILLed by the parent
  int code = -1;        // exit code when exited
  int signal = 0;       // terminating signal otherwise
  double wallMs = 0;    // from fork to reap, as seen by the parent
  Report report;

  std::string describe() const {
    std::string s = killed ? "killed at the deadline (hung)"
                    : exited ? "exit code " + std::to_string(code)
                             : "died of signal " + std::to_string(signal);
    return s + ", child ms " + std::to_string(report.ms) + ", wall ms " + std::to_string(wallMs) +
           ", message: \"" + report.msg + "\"";
  }
};

void writeAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= size_t(w);
  }
}

// In a child: the pipe its report goes to, and the one the parent closes to release it.
int gReportFd = -1;
int gReleaseFd = -1;

// In a child: hand the report to the parent now (only the first call counts).
void publish(Report& r) {
  if (gReportFd < 0) return;
  if (r.msg.size() > 2000) r.msg.resize(2000);  // stays far below the pipe's capacity
  writeAll(gReportFd, &r.ms, sizeof r.ms);
  writeAll(gReportFd, r.msg.data(), r.msg.size());
  close(gReportFd);  // EOF: the parent has the whole report
  gReportFd = -1;
}

// In a child: publish the report, then stay alive (sockets and all) until the parent
// calls Procs::release(), or at most 15 s.
void publishAndHold(Report& r) {
  publish(r);
  const auto end = after(15000);
  for (;;) {
    const int ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
    if (ms <= 0) return;
    pollfd p{gReleaseFd, POLLIN, 0};
    const int n = poll(&p, 1, ms);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    char c;
    if (read(gReleaseFd, &c, 1) <= 0) return;  // EOF: released
  }
}

// Forked children with deadlines.
class Procs {
 public:
  using Body = std::function<int(Report&)>;

  Procs() {
    kids_.reserve(64);  // results stay where they are while more children start
    REQUIRE(pipe(release_) == 0);
  }

  ~Procs() {
    release();
    for (Child& c : kids_)
      if (!c.reaped) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, nullptr, 0);
      }
    for (Child& c : kids_)
      if (c.fd >= 0) close(c.fd);
    close(release_[0]);
  }

  // Fork a child running body; returns its index.
  size_t spawn(Body body) {
    REQUIRE(kids_.size() < kids_.capacity());
    int p[2];
    REQUIRE(pipe(p) == 0);
    fflush(nullptr);  // nothing buffered may be written twice
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(p[0]);
      if (release_[1] >= 0) close(release_[1]);
      gReportFd = p[1];
      gReleaseFd = release_[0];
      Report r;
      int code;
      try {
        code = body(r);
      } catch (const std::exception& e) {
        code = kException, r.msg = std::string("exception: ") + e.what();
      } catch (...) {
        code = kException, r.msg = "unknown exception";
      }
      publish(r);
      _exit(code);
    }
    close(p[1]);
    Child c;
    c.pid = pid;
    c.fd = p[0];
    c.start = Clock::now();
    kids_.push_back(c);
    return kids_.size() - 1;
  }

  // Wait until each of `which` has published its report (or exited); false if one
  // had not by the deadline.
  bool waitReports(const std::vector<size_t>& which, Clock::time_point deadline) {
    bool all = true;
    for (size_t i : which) all = drain(i, deadline) && all;
    return all;
  }

  // Let the children blocked in publishAndHold() go on.
  void release() {
    if (release_[1] >= 0) close(release_[1]);
    release_[1] = -1;
  }

  // Wait until child i exits, killing it once `deadline` passes.
  const Result& wait(size_t i, Clock::time_point deadline) {
    waitAny({i}, deadline);
    return kids_[i].result;
  }

  // Wait until one of `which` has exited (or all were killed at the deadline);
  // returns the index of one that exited on its own, or SIZE_MAX.
  size_t waitAny(const std::vector<size_t>& which, Clock::time_point deadline) {
    for (;;) {
      for (size_t i : which) {
        if (kids_[i].reaped) return i;
        if (tryReap(i, false)) return i;
      }
      if (Clock::now() >= deadline) {
        for (size_t i : which) tryReap(i, true);
        return SIZE_MAX;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  void waitAll(Clock::time_point deadline) {
    for (size_t i = 0; i < kids_.size(); ++i) wait(i, deadline);
  }

  const Result& result(size_t i) const { return kids_[i].result; }

 private:
  struct Child {
    pid_t pid = -1;
    int fd = -1;  // read end of the report pipe, until EOF
    Clock::time_point start;
    bool reaped = false;
    std::string data;
    Result result;
  };

  // Read child i's report until EOF or the deadline.
  bool drain(size_t i, Clock::time_point deadline) {
    Child& c = kids_[i];
    char buf[4096];
    while (c.fd >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{c.fd, POLLIN, 0};
      const int r = poll(&p, 1, left.count() > 0 ? int(left.count()) : 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      const ssize_t n = read(c.fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) {
        c.data.append(buf, size_t(n));
        continue;
      }
      close(c.fd);  // EOF (or an error): the report is complete
      c.fd = -1;
      if (c.data.size() >= sizeof(double)) {
        memcpy(&c.result.report.ms, c.data.data(), sizeof(double));
        c.result.report.msg = c.data.substr(sizeof(double));
      }
    }
    return true;
  }

  // Reap child i if it has exited (or, with force, kill and reap it).
  bool tryReap(size_t i, bool force) {
    Child& c = kids_[i];
    if (c.reaped) return true;
    int st = 0;
    pid_t r = waitpid(c.pid, &st, WNOHANG);
    if (r == 0 && force) {
      kill(c.pid, SIGKILL);
      r = waitpid(c.pid, &st, 0);
      c.result.killed = true;
    }
    if (r != c.pid) return false;
    c.reaped = true;
    c.result.wallMs = msSince(c.start);
    if (!c.result.killed && WIFEXITED(st)) c.result.exited = true, c.result.code = WEXITSTATUS(st);
    else if (WIFSIGNALED(st)) c.result.signal = WTERMSIG(st);
    // The child is gone, so its end of the pipe is closed: this ends at EOF at once.
    drain(i, Clock::now() + std::chrono::seconds(5));
    return true;
  }

  int release_[2] = {-1, -1};  // the parent holds the write end until release()
  std::vector<Child> kids_;
};

UniqueIdBody freshId() {
  fcUniqueId id;
  REQUIRE(fc::makeUniqueId(&id) == fcSuccess);
  UniqueIdBody body;
  REQUIRE(fc::parseUniqueId(id, &body) == fcSuccess);
  return body;
}

// In a child: a failed check, with its explanation.
int checkFailed(Report& r, const std::string& what) {
  r.msg = what;
  return kCheckFailed;
}

// In a child: a failed bootstrap call, with the library's explanation.
int callFailed(Report& r, fcResult_t res) {
  r.msg = fc::lastError();
  return int(res);
}

// In a child: join, then check one all-gather of ranks (the connections work).
int joinAndGather(const UniqueIdBody& id, int rank, int nranks, uint64_t timeoutMs, Report& r) {
  std::unique_ptr<Bootstrap> b;
  const auto t0 = Clock::now();
  fcResult_t res = Bootstrap::create(id, rank, nranks, timeoutMs, &b);
  r.ms = msSince(t0);
  if (res != fcSuccess) return callFailed(r, res);
  if (b->rank() != rank || b->nranks() != nranks) return checkFailed(r, "rank()/nranks() wrong");
  std::vector<int32_t> all(size_t(nranks), -1);
  int32_t mine = 1000 + rank;
  if ((res = b->allGather(&mine, all.data(), sizeof mine)) != fcSuccess) return callFailed(r, res);
  for (int q = 0; q < nranks; ++q)
    if (all[size_t(q)] != 1000 + q) return checkFailed(r, "all-gather of ranks: wrong value");
  if ((res = b->barrier()) != fcSuccess) return callFailed(r, res);
  return fcSuccess;
}

unsigned char pattern(int rank, size_t i, int round) {
  return static_cast<unsigned char>(rank * 31 + int(i) * 7 + round * 13 + 1 + int(i >> 8));
}

int countOpenFds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the directory's own descriptor
}

// A memfd holding `content`.
int makeMemfd(const std::string& content) {
  int fd = int(memfd_create("fc-test", MFD_CLOEXEC));
  if (fd < 0) return -1;
  if (write(fd, content.data(), content.size()) != ssize_t(content.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string fdContent(int rank, int i) {
  return "fd " + std::to_string(i) + " of rank " + std::to_string(rank) + std::string(size_t(rank * 17 + i), '#');
}

// The message says rank `who` is missing, e.g. "rank(s) 2 of 3", "rank 0".
bool namesRank(const std::string& msg, const std::string& who) {
  return std::regex_search(msg, std::regex("rank(\\(s\\)|s)? " + who + "([^0-9,]|$)"));
}

bool isFailure(const Result& r, std::initializer_list<int> codes) {
  if (!r.exited) return false;
  for (int c : codes)
    if (r.code == c) return true;
  return false;
}

}  // namespace

TEST_CASE("unique id: make, parse, rendezvous name", "[bootstrap][uniqueid]") {
  fcUniqueId a, b;
  REQUIRE(fc::makeUniqueId(&a) == fcSuccess);
  REQUIRE(fc::makeUniqueId(&b) == fcSuccess);
  UniqueIdBody ba, bb;
  REQUIRE(fc::parseUniqueId(a, &ba) == fcSuccess);
  REQUIRE(fc::parseUniqueId(b, &bb) == fcSuccess);
  CHECK(ba.magic == UniqueIdBody::kMagic);
  CHECK(ba.version == UniqueIdBody::kVersion);
  CHECK(ba.creatorPid == int32_t(getpid()));
  CHECK(memcmp(ba.secret, bb.secret, sizeof ba.secret) != 0);
  CHECK(memcmp(ba.name, bb.name, sizeof ba.name) != 0);
  const std::string na = fc::rendezvousName(ba);
  CHECK(std::regex_match(na, std::regex("fusedcomm\\.[0-9a-f]{32}")));
  CHECK(na != fc::rendezvousName(bb));

  // The id records the host that made it (the last 64 bytes, appended in 0.2.x).
  const fc::HostId here = fc::thisHost();
  CHECK(ba.hasCreatorHost());
  CHECK(ba.hostHash == here.hash);
  CHECK(std::string(ba.hostName) == std::string(here.name).substr(0, sizeof ba.hostName - 1));
  // An id of an older library (zeros there) parses, without a host record; so does
  // one whose record does not check out (it is informational only).
  for (int damage : {0, 1}) {
    fcUniqueId old = a;
    if (damage == 0) memset(old.internal + 64, 0, 64);
    else old.internal[offsetof(UniqueIdBody, hostName)] ^= 1;
    UniqueIdBody bo;
    INFO((damage == 0 ? "zeroed" : "damaged") << " host record");
    CHECK(fc::parseUniqueId(old, &bo) == fcSuccess);
    CHECK_FALSE(bo.hasCreatorHost());
    CHECK(fc::rendezvousName(bo) == na);
  }

  // A changed secret without a recomputed checksum is rejected.
  fcUniqueId c = a;
  c.internal[offsetof(UniqueIdBody, secret)] ^= 1;
  UniqueIdBody bc;
  CHECK(fc::parseUniqueId(c, &bc) == fcInvalidArgument);
  CHECK_THAT(std::string(fc::lastError()), ContainsSubstring("checksum"));
}

// tools/launch-ranks (a launcher for carried binaries, without the library) makes its
// ids itself: the library must accept them, and two must differ.
TEST_CASE("unique id: tools/launch-ranks's ids parse", "[bootstrap][uniqueid]") {
  const char* tool = getenv("FC_LAUNCH_RANKS");
  if (tool == nullptr) SKIP("FC_LAUNCH_RANKS (the tool's path) is not set: run under meson test");
  auto made = [&] {
    std::string hex;
    FILE* f = popen((std::string("python3 ") + tool + " --print-id").c_str(), "r");
    REQUIRE(f != nullptr);
    char buf[512];
    while (fgets(buf, sizeof buf, f) != nullptr) hex += buf;
    REQUIRE(pclose(f) == 0);
    while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) hex.pop_back();
    REQUIRE(hex.size() == 2 * sizeof(fcUniqueId::internal));
    fcUniqueId id;
    for (size_t i = 0; i < sizeof id.internal; ++i) id.internal[i] = char(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    return id;
  };
  const fcUniqueId a = made(), b = made();
  UniqueIdBody ba, bb;
  INFO(fc::lastError());
  REQUIRE(fc::parseUniqueId(a, &ba) == fcSuccess);
  REQUIRE(fc::parseUniqueId(b, &bb) == fcSuccess);
  CHECK(fc::rendezvousName(ba) != fc::rendezvousName(bb));
  CHECK(memcmp(ba.secret, bb.secret, sizeof ba.secret) != 0);
  CHECK_FALSE(ba.hasCreatorHost());
}

TEST_CASE("Bootstrap::create argument checks and the world of one", "[bootstrap]") {
  const UniqueIdBody id = freshId();
  std::unique_ptr<Bootstrap> b;
  CHECK(Bootstrap::create(id, -1, 2, 1000, &b) == fcInvalidArgument);
  CHECK(Bootstrap::create(id, 2, 2, 1000, &b) == fcInvalidArgument);
  CHECK(Bootstrap::create(id, 0, 0, 1000, &b) == fcInvalidArgument);
  CHECK(Bootstrap::create(id, 0, Bootstrap::kMaxRanks + 1, 1000, &b) == fcInvalidArgument);
  CHECK(b == nullptr);

  REQUIRE(Bootstrap::create(id, 0, 1, 1000, &b) == fcSuccess);
  REQUIRE(b != nullptr);
  CHECK(b->rank() == 0);
  CHECK(b->nranks() == 1);
  const char mine[5] = "abcd";
  char all[5] = {};
  REQUIRE(b->allGather(mine, all, 4) == fcSuccess);
  CHECK(std::string(all) == "abcd");
  int fds[2] = {7, 7}, got[2] = {0, 0};
  REQUIRE(b->allGatherFds(fds, 2, got) == fcSuccess);
  CHECK(got[0] == -1);
  CHECK(got[1] == -1);
  CHECK(b->barrier() == fcSuccess);
}

TEST_CASE("rendezvous and all-gathers across 4 processes", "[bootstrap][process]") {
  constexpr int kRanks = 4;
  const UniqueIdBody id = freshId();
  Procs procs;
  // Start the highest rank first: peers must retry until rank 0 listens.
  for (int rank = kRanks - 1; rank >= 0; --rank)
    procs.spawn([&id, rank](Report& r) -> int {
      std::unique_ptr<Bootstrap> b;
      fcResult_t res = Bootstrap::create(id, rank, kRanks, 3000, &b);
      if (res != fcSuccess) return callFailed(r, res);
      if (b->rank() != rank || b->nranks() != kRanks) return checkFailed(r, "rank()/nranks() wrong");
      const size_t sizes[] = {100, 1, 8, 4093, 200000, 100};
      int round = 0;
      for (size_t bytes : sizes) {
        ++round;
        std::vector<unsigned char> mine(bytes), all(bytes * kRanks, 0xcc);
        for (size_t i = 0; i < bytes; ++i) mine[i] = pattern(rank, i, round);
        const bool alias = round % 2 == 0;  // `mine` may live inside `all`
        if (alias) memcpy(all.data() + size_t(rank) * bytes, mine.data(), bytes);
        const void* src = alias ? all.data() + size_t(rank) * bytes : mine.data();
        if ((res = b->allGather(src, all.data(), bytes)) != fcSuccess) return callFailed(r, res);
        for (int q = 0; q < kRanks; ++q)
          for (size_t i = 0; i < bytes; ++i)
            if (all[size_t(q) * bytes + i] != pattern(q, i, round))
              return checkFailed(r, "round " + std::to_string(round) + " (" + std::to_string(bytes) +
                                        " bytes): wrong byte " + std::to_string(i) + " from rank " +
                                        std::to_string(q));
        if (round % 2 == 1 && (res = b->barrier()) != fcSuccess) return callFailed(r, res);
      }
      for (int k = 0; k < 3; ++k)
        if ((res = b->barrier()) != fcSuccess) return callFailed(r, res);
      return fcSuccess;
    });
  procs.waitAll(after(10000));
  for (size_t i = 0; i < kRanks; ++i) {
    INFO("rank " << (kRanks - 1 - int(i)) << ": " << procs.result(i).describe());
    CHECK(procs.result(i).exited);
    CHECK(procs.result(i).code == fcSuccess);
  }
}

TEST_CASE("allGatherFds passes descriptors between 3 processes without leaks", "[bootstrap][process][fds]") {
  constexpr int kRanks = 3;
  const UniqueIdBody id = freshId();
  Procs procs;
  for (int rank = 0; rank < kRanks; ++rank)
    procs.spawn([&id, rank](Report& r) -> int {
      std::unique_ptr<Bootstrap> b;
      fcResult_t res = Bootstrap::create(id, rank, kRanks, 3000, &b);
      if (res != fcSuccess) return callFailed(r, res);
      const int before = countOpenFds();
      if (before < 0) return checkFailed(r, "cannot read /proc/self/fd");
      for (int n : {1, 2, 4, 1}) {
        int mine[4];
        for (int i = 0; i < n; ++i)
          if ((mine[i] = makeMemfd(fdContent(rank, i))) < 0)
            return checkFailed(r, std::string("memfd_create/write: ") + strerror(errno));
        int all[4 * kRanks];
        memset(all, 0x7f, sizeof all);
        if ((res = b->allGatherFds(mine, n, all)) != fcSuccess) return callFailed(r, res);
        std::string bad;
        for (int q = 0; q < kRanks && bad.empty(); ++q)
          for (int i = 0; i < n && bad.empty(); ++i) {
            const int fd = all[q * n + i];
            const std::string where = "n=" + std::to_string(n) + ", rank " + std::to_string(q) +
                                      " fd " + std::to_string(i) + ": ";
            if (q == rank) {
              if (fd != -1) bad = where + "own slot is " + std::to_string(fd) + ", not -1";
              continue;
            }
            if (fd < 0) { bad = where + "no descriptor"; continue; }
            for (int j = 0; j < n; ++j)
              if (fd == mine[j]) bad = where + "is one of this rank's own descriptors";
            const int flags = fcntl(fd, F_GETFD);
            if (flags < 0 || !(flags & FD_CLOEXEC)) bad = where + "not a valid close-on-exec descriptor";
            const std::string want = fdContent(q, i);
            std::string got(want.size() + 16, '\0');
            // pread: the open file description (and its offset) is shared by every holder.
            const ssize_t k = pread(fd, &got[0], got.size(), 0);
            got.resize(k > 0 ? size_t(k) : 0);
            if (bad.empty() && got != want) bad = where + "reads \"" + got + "\", expected \"" + want + "\"";
          }
        for (int k = 0; k < n * kRanks; ++k)
          if (all[k] >= 0) close(all[k]);
        for (int i = 0; i < n; ++i) close(mine[i]);
        if (!bad.empty()) return checkFailed(r, bad);
        // Descriptors and data collectives interleave in step.
        int32_t v = rank * 10 + n, vs[kRanks];
        if ((res = b->allGather(&v, vs, sizeof v)) != fcSuccess) return callFailed(r, res);
        for (int q = 0; q < kRanks; ++q)
          if (vs[q] != q * 10 + n) return checkFailed(r, "all-gather after the fd exchange is wrong");
      }
      const int afterCount = countOpenFds();
      if (afterCount != before)
        return checkFailed(r, "descriptor leak: " + std::to_string(before) + " open before, " +
                                  std::to_string(afterCount) + " after");
      return fcSuccess;
    });
  procs.waitAll(after(10000));
  for (int rank = 0; rank < kRanks; ++rank) {
    INFO("rank " << rank << ": " << procs.result(size_t(rank)).describe());
    CHECK(procs.result(size_t(rank)).exited);
    CHECK(procs.result(size_t(rank)).code == fcSuccess);
  }
}

TEST_CASE("a rank with the wrong secret is rejected; the legitimate ranks go on", "[bootstrap][process][security]") {
  const UniqueIdBody id = freshId();
  UniqueIdBody impostorId = id;  // same rendezvous name, another secret
  for (uint8_t& s : impostorId.secret) s = uint8_t(s ^ 0x5a);
  REQUIRE(fc::rendezvousName(impostorId) == fc::rendezvousName(id));

  Procs procs;
  const size_t root = procs.spawn([&id](Report& r) { return joinAndGather(id, 0, 2, 5000, r); });
  // The impostor reaches rank 0 while rank 1's slot is still free: only the secret can stop it.
  const size_t impostor =
      procs.spawn([&impostorId](Report& r) { return joinAndGather(impostorId, 1, 2, 3000, r); });
  const Result& bad = procs.wait(impostor, after(5000));
  INFO("impostor: " << bad.describe());
  CHECK(bad.exited);
  CHECK(bad.code == fcInvalidArgument);
  CHECK_THAT(bad.report.msg, ContainsSubstring("secret"));
  CHECK(bad.report.ms < 2000);  // rejected at once, not left to time out

  const size_t legit = procs.spawn([&id](Report& r) { return joinAndGather(id, 1, 2, 3000, r); });
  procs.waitAll(after(6000));
  for (size_t i : {root, legit}) {
    INFO((i == root ? "rank 0: " : "rank 1: ") << procs.result(i).describe());
    CHECK(procs.result(i).exited);
    CHECK(procs.result(i).code == fcSuccess);
  }
}

TEST_CASE("a rank with a different nranks is rejected", "[bootstrap][process]") {
  const UniqueIdBody id = freshId();
  Procs procs;
  const size_t root = procs.spawn([&id](Report& r) { return joinAndGather(id, 0, 2, 5000, r); });
  const size_t wrong = procs.spawn([&id](Report& r) { return joinAndGather(id, 1, 3, 3000, r); });
  const Result& bad = procs.wait(wrong, after(5000));
  INFO("rank 1 of 3: " << bad.describe());
  CHECK(bad.exited);
  CHECK(bad.code == fcRemoteError);
  CHECK_THAT(bad.report.msg, ContainsSubstring("nranks"));
  const size_t legit = procs.spawn([&id](Report& r) { return joinAndGather(id, 1, 2, 3000, r); });
  procs.waitAll(after(6000));
  for (size_t i : {root, legit}) {
    INFO((i == root ? "rank 0: " : "rank 1: ") << procs.result(i).describe());
    CHECK(procs.result(i).code == fcSuccess);
  }
}

TEST_CASE("a missing rank makes the rendezvous time out, naming it; a rank of another host says so",
          "[bootstrap][process][timeout][hosts]") {
  constexpr uint64_t kTimeout = 1000;
  SECTION("world 3, rank 2 never comes") {
    const UniqueIdBody id = freshId();
    Procs procs;
    for (int rank : {0, 1})
      procs.spawn([&id, rank](Report& r) { return joinAndGather(id, rank, 3, kTimeout, r); });
    procs.waitAll(after(8000));
    for (int rank : {0, 1}) {
      const Result& res = procs.result(size_t(rank));
      INFO("rank " << rank << ": " << res.describe());
      CHECK(res.exited);
      CHECK(res.code == fcTimeout);
      CHECK(res.report.ms >= kTimeout * 0.8);
      CHECK(res.report.ms < 4000);
      CHECK(namesRank(res.report.msg, "2"));
      CHECK_THAT(res.report.msg, ContainsSubstring("FC_TIMEOUT_MS") || ContainsSubstring("never joined"));
    }
  }
  SECTION("world 2, rank 0 never comes") {
    // On the host that made the id: a timeout naming rank 0. On another host (faked
    // with FC_HOST_ID), where no rank 0 is in reach of a Unix socket: invalid usage
    // naming both hosts.
    const bool elsewhere = GENERATE(false, true);
    INFO((elsewhere ? "rank 1 on another host than the id's maker" : "rank 1 on the id maker's host"));
    unsetenv("FC_HOST_ID");
    const UniqueIdBody id = freshId();
    Procs procs;
    const size_t one = procs.spawn([&id, elsewhere](Report& r) {
      if (elsewhere) setenv("FC_HOST_ID", "node-b", 1);
      return joinAndGather(id, 1, 2, kTimeout, r);
    });
    const Result& res = procs.wait(one, after(8000));
    INFO("rank 1: " << res.describe());
    CHECK(res.exited);
    CHECK(res.code == (elsewhere ? fcInvalidUsage : fcTimeout));
    CHECK(res.report.ms >= kTimeout * 0.9);
    CHECK(res.report.ms < 4000);
    if (!elsewhere) {
      CHECK(namesRank(res.report.msg, "0"));
      return;
    }
    CHECK_THAT(res.report.msg, ContainsSubstring("runs on host 'node-b'"));
    CHECK_THAT(res.report.msg, ContainsSubstring("made on host " + fc::hostLabel(fc::thisHost())));
    CHECK_THAT(res.report.msg, ContainsSubstring("one per node"));
  }
}

TEST_CASE("a peer that dies after the rendezvous makes the others fail fast", "[bootstrap][process]") {
  constexpr uint64_t kTimeout = 3000;
  const int victim = GENERATE(2, 0);  // a leaf, and the root of the star
  INFO("rank " << victim << " exits right after the rendezvous");
  const UniqueIdBody id = freshId();
  Procs procs;
  for (int rank = 0; rank < 3; ++rank)
    procs.spawn([&id, rank, victim](Report& r) -> int {
      std::unique_ptr<Bootstrap> b;
      fcResult_t res = Bootstrap::create(id, rank, 3, kTimeout, &b);
      if (res != fcSuccess) return callFailed(r, res);
      if (rank == victim) _exit(0);  // dies without a word: the kernel closes its sockets
      std::vector<char> mine(64, char(rank)), all(64 * 3);
      const auto t0 = Clock::now();
      res = b->allGather(mine.data(), all.data(), mine.size());
      r.ms = msSince(t0);
      if (res == fcSuccess) return checkFailed(r, "all-gather succeeded without rank " + std::to_string(victim));
      r.msg = fc::lastError();
      // The communicator stays broken: the next collective fails at once too.
      const auto t1 = Clock::now();
      fcResult_t again = b->barrier();
      if (again == fcSuccess || msSince(t1) > 500)
        return checkFailed(r, "a collective after the failure did not fail at once: " + r.msg);
      // Stay alive, connections open, until every survivor has reported: only the
      // bootstrap's own reaction (not this process's exit) may release the other one.
      publishAndHold(r);
      return int(res);
    });
  std::vector<size_t> survivors;
  for (int rank = 0; rank < 3; ++rank)
    if (rank != victim) survivors.push_back(size_t(rank));
  CHECK(procs.waitReports(survivors, after(int(kTimeout) + 3000)));
  procs.release();
  procs.waitAll(after(5000));
  for (int rank = 0; rank < 3; ++rank) {
    const Result& res = procs.result(size_t(rank));
    INFO("rank " << rank << ": " << res.describe());
    REQUIRE(res.exited);
    if (rank == victim) {
      CHECK(res.code == 0);
      continue;
    }
    CHECK(isFailure(res, {fcRemoteError, fcTimeout}));
    CHECK(res.report.ms < double(kTimeout) + 1000);
    CHECK(res.report.ms < double(kTimeout) / 2);  // noticed the closed socket, not the deadline
    CHECK_FALSE(res.report.msg.empty());
  }
}

TEST_CASE("two processes claiming the same rank", "[bootstrap][process]") {
  SECTION("world 2: one of them joins, the other fails cleanly") {
    const UniqueIdBody id = freshId();
    Procs procs;
    constexpr int kTimeout = 2000;
    const size_t root = procs.spawn([&id](Report& r) { return joinAndGather(id, 0, 2, kTimeout, r); });
    const size_t a = procs.spawn([&id](Report& r) { return joinAndGather(id, 1, 2, kTimeout, r); });
    const size_t b = procs.spawn([&id](Report& r) { return joinAndGather(id, 1, 2, kTimeout, r); });
    procs.waitAll(after(kTimeout + 6000));
    const Result &r0 = procs.result(root), &ra = procs.result(a), &rb = procs.result(b);
    INFO("rank 0: " << r0.describe() << "\nfirst rank 1: " << ra.describe() << "\nsecond rank 1: "
                    << rb.describe());
    REQUIRE(r0.exited);
    REQUIRE(ra.exited);
    REQUIRE(rb.exited);
    CHECK(r0.code == fcSuccess);
    CHECK(((ra.code == fcSuccess) != (rb.code == fcSuccess)));  // exactly one
    const Result& loser = ra.code == fcSuccess ? rb : ra;
    CHECK(isFailure(loser, {fcRemoteError, fcTimeout}));
    CHECK_FALSE(loser.report.msg.empty());
    CHECK(loser.report.ms < kTimeout + 2500);  // at worst its own deadline (+ grace)
  }
  SECTION("world 3: the second claimant is rejected while the rendezvous is open") {
    const UniqueIdBody id = freshId();
    Procs procs;
    const size_t root = procs.spawn([&id](Report& r) { return joinAndGather(id, 0, 3, 5000, r); });
    const size_t a = procs.spawn([&id](Report& r) { return joinAndGather(id, 1, 3, 5000, r); });
    const size_t b = procs.spawn([&id](Report& r) { return joinAndGather(id, 1, 3, 5000, r); });
    // Rank 2 is not there yet, so nobody can succeed: the first to exit is the rejected one.
    const size_t first = procs.waitAny({a, b}, after(4000));
    REQUIRE(first != SIZE_MAX);
    const Result& rejected = procs.result(first);
    INFO("rejected claimant: " << rejected.describe());
    CHECK(rejected.exited);
    CHECK(rejected.code == fcRemoteError);
    CHECK_THAT(rejected.report.msg, ContainsSubstring("same rank"));
    CHECK(rejected.report.ms < 2000);

    const size_t two = procs.spawn([&id](Report& r) { return joinAndGather(id, 2, 3, 3000, r); });
    procs.waitAll(after(8000));
    const size_t kept = first == a ? b : a;
    for (size_t i : {root, kept, two}) {
      INFO("member " << i << ": " << procs.result(i).describe());
      CHECK(procs.result(i).exited);
      CHECK(procs.result(i).code == fcSuccess);
    }
  }
}

namespace {

fc::HostId fakeHost(uint64_t hash, const char* name, const char* bootId = "") {
  fc::HostId h{};
  h.hash = hash;
  snprintf(h.name, sizeof h.name, "%s", name);
  snprintf(h.bootId, sizeof h.bootId, "%s", bootId);
  return h;
}

// Lines of /proc/net/unix naming the abstract socket `name` (the listening socket
// and the connections it accepted carry it).
int socketsNamed(const std::string& name) {
  std::ifstream f("/proc/net/unix");
  int n = 0;
  for (std::string line; std::getline(f, line);)
    if (line.size() > name.size() + 1 && line.compare(line.size() - name.size() - 1, std::string::npos,
                                                      "@" + name) == 0)
      ++n;
  return n;
}

}  // namespace

TEST_CASE("host identity: FC_HOST_ID, hostname and boot id", "[bootstrap][hosts]") {
  Procs procs;
  const size_t kid = procs.spawn([](Report& r) -> int {
    unsetenv("FC_HOST_ID");
    const fc::HostId real = fc::thisHost(), again = fc::thisHost();
    char name[256] = {0};
    gethostname(name, sizeof name - 1);
    if (real.hash != again.hash || std::string(real.name) != std::string(name).substr(0, sizeof real.name - 1))
      return checkFailed(r, "the real host's identity is not its hostname, or not stable");
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string bootId;
    std::getline(boot, bootId);
    if (std::string(real.bootId) != bootId.substr(0, sizeof real.bootId - 1))
      return checkFailed(r, "boot id '" + std::string(real.bootId) + "', /proc says '" + bootId + "'");
    setenv("FC_HOST_ID", "", 1);  // empty: not set
    if (fc::thisHost().hash != real.hash) return checkFailed(r, "an empty FC_HOST_ID changed the identity");
    setenv("FC_HOST_ID", "node-a", 1);
    const fc::HostId a = fc::thisHost();
    setenv("FC_HOST_ID", "node-b", 1);
    const fc::HostId b = fc::thisHost();
    if (std::string(a.name) != "node-a" || a.bootId[0] != '\0' || a.hash == b.hash || a.hash == real.hash)
      return checkFailed(r, "FC_HOST_ID is not the whole identity");
    setenv("FC_HOST_ID", std::string(100, 'x').c_str(), 1);  // longer than the name field
    const fc::HostId x100 = fc::thisHost();
    setenv("FC_HOST_ID", std::string(101, 'x').c_str(), 1);
    if (x100.hash == fc::thisHost().hash) return checkFailed(r, "a long FC_HOST_ID is cut before hashing");
    return fcSuccess;
  });
  const Result& res = procs.wait(kid, after(5000));
  INFO(res.describe());
  CHECK(res.exited);
  CHECK(res.code == fcSuccess);
}

TEST_CASE("checkOneHost: one host passes; several are refused, named with their ranks", "[bootstrap][hosts]") {
  const fc::HostId a = fakeHost(1, "node-a", "0123456789ab"), b = fakeHost(2, "node-b", "ba9876543210");
  CHECK(fc::checkOneHost({a}) == fcSuccess);
  CHECK(fc::checkOneHost({a, a, a}) == fcSuccess);

  REQUIRE(fc::checkOneHost({a, a, b, b}) == fcInvalidUsage);
  std::string msg = fc::lastError();
  CHECK_THAT(msg, ContainsSubstring("2 hosts (ranks 0-1 on 'node-a', ranks 2-3 on 'node-b')"));
  CHECK_THAT(msg, ContainsSubstring("one per node"));
  CHECK_THAT(msg, ContainsSubstring("NCCL"));
  CHECK_THAT(msg, ContainsSubstring("FC_HOST_ID"));
  CHECK_THAT(msg, !ContainsSubstring("boot id 0123"));  // the names tell them apart

  REQUIRE(fc::checkOneHost({b, a, b, a, a}) == fcInvalidUsage);
  CHECK_THAT(std::string(fc::lastError()),
             ContainsSubstring("(ranks 0,2 on 'node-b', ranks 1,3-4 on 'node-a')"));

  // Two machines of one hostname: their boot ids tell them apart.
  const fc::HostId twin = fakeHost(3, "node-a", "fedcba987654");
  REQUIRE(fc::checkOneHost({a, twin}) == fcInvalidUsage);
  msg = fc::lastError();
  CHECK_THAT(msg, ContainsSubstring("rank 0 on 'node-a' (boot id 01234567), rank 1 on 'node-a' (boot id fedcba98)"));

  // Many hosts: the first four listed, the message within fcGetLastError's buffer.
  std::vector<fc::HostId> many;
  for (int r = 0; r < 64; ++r) many.push_back(fakeHost(uint64_t(100 + r / 2), (std::string(60, 'h') + std::to_string(r / 2)).c_str()));
  REQUIRE(fc::checkOneHost(many) == fcInvalidUsage);
  msg = fc::lastError();
  CHECK_THAT(msg, ContainsSubstring("32 hosts (ranks 0-1 on 'hhh"));
  CHECK_THAT(msg, ContainsSubstring("and 28 more hosts"));
  CHECK_THAT(msg, ContainsSubstring("FC_HOST_ID where it is set"));  // the end: nothing cut
}

TEST_CASE("ranks on several hosts: every rank refuses at once, names the hosts, leaves nothing open",
          "[bootstrap][process][hosts]") {
  // Each character: the fake host (FC_HOST_ID) of that rank.
  const std::string layout = GENERATE("aabb", "abab", "aab", "ab");
  INFO("hosts by rank: " << layout);
  const int nranks = int(layout.size());
  constexpr uint64_t kTimeout = 3000;
  const UniqueIdBody id = freshId();
  const std::string name = fc::rendezvousName(id);
  Procs procs;
  for (int rank = 0; rank < nranks; ++rank)
    procs.spawn([&id, &name, &layout, rank, nranks](Report& r) -> int {
      setenv("FC_HOST_ID", ("fake-host-" + layout.substr(size_t(rank), 1)).c_str(), 1);
      const int fds = countOpenFds();
      std::unique_ptr<Bootstrap> b;
      const auto t0 = Clock::now();
      const fcResult_t res = Bootstrap::create(id, rank, nranks, kTimeout, &b);
      r.ms = msSince(t0);
      r.msg = fc::lastError();
      if (res == fcSuccess) return checkFailed(r, "joined a world of several hosts");
      if (b != nullptr) return checkFailed(r, "a bootstrap was handed out: " + r.msg);
      // Nothing left: every connection closed, and (rank 0) nobody holds the name.
      const int left = countOpenFds();
      if (left != fds)
        return checkFailed(r, std::to_string(fds) + " descriptors open before, " + std::to_string(left) +
                                  " after the refusal: " + r.msg);
      if (rank == 0 && socketsNamed(name) != 0)
        return checkFailed(r, "a socket named @" + name + " is still open after the refusal: " + r.msg);
      return int(res);
    });
  procs.waitAll(after(int(kTimeout) + 5000));
  for (int rank = 0; rank < nranks; ++rank) {
    const Result& res = procs.result(size_t(rank));
    INFO("rank " << rank << ": " << res.describe());
    CHECK(res.exited);
    CHECK(res.code == fcInvalidUsage);
    CHECK(res.report.ms < double(kTimeout) / 2);  // at the all-gather after the rendezvous, not a deadline
    CHECK_THAT(res.report.msg, ContainsSubstring("2 hosts ("));
    CHECK_THAT(res.report.msg, ContainsSubstring("on 'fake-host-a'"));
    CHECK_THAT(res.report.msg, ContainsSubstring("on 'fake-host-b'"));
    CHECK_THAT(res.report.msg, ContainsSubstring("NCCL"));
  }
  // The same ranks, all declaring one host, then join with the same id: the refusal
  // left its rendezvous name free (rank 0 could not listen on it otherwise).
  Procs one;
  for (int rank = 0; rank < nranks; ++rank)
    one.spawn([&id, rank, nranks](Report& r) {
      setenv("FC_HOST_ID", "fake-host-a", 1);
      return joinAndGather(id, rank, nranks, kTimeout, r);
    });
  one.waitAll(after(int(kTimeout) + 5000));
  for (int rank = 0; rank < nranks; ++rank) {
    INFO("one host, rank " << rank << ": " << one.result(size_t(rank)).describe());
    CHECK(one.result(size_t(rank)).code == fcSuccess);
  }
}
