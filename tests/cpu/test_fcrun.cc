// Tests of the fcrun launcher (tools/fcrun), run as a real process, and of the helpers
// in tools/common/fc_env.h. Needs no GPU. The fcrun binary comes from env FCRUN (set by
// the meson test).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fc_env.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Run {
  int status = -1;  // shell convention: exit status, or 128+signal
  std::string out, err;
  double secs = 0;
};

// Optional: once every file in waitFiles exists, send sig to fcrun (tests fcrun's own
// signal handling at a point where all ranks are known to be running).
struct SignalWhen {
  std::vector<std::string> waitFiles;
  int sig = 0;
};

const char* fcrunPath() {
  const char* p = std::getenv("FCRUN");
  if (p == nullptr || *p == '\0') FAIL("env FCRUN (path of the fcrun binary) is not set");
  return p;
}

bool fileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Runs fcrun with args, collecting its stdout and stderr separately. A hung fcrun is
// SIGKILLed after 20 s so that a bug fails the test instead of hanging it.
Run runFcrun(const std::vector<std::string>& args, const SignalWhen& when = {}) {
  const char* path = fcrunPath();
  int outPipe[2], errPipe[2];
  REQUIRE(pipe2(outPipe, O_CLOEXEC) == 0);
  REQUIRE(pipe2(errPipe, O_CLOEXEC) == 0);
  const Clock::time_point start = Clock::now();
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(outPipe[1], 1);
    dup2(errPipe[1], 2);
    // Stale values that fcrun must override, and a variable it must not invent.
    setenv("FC_RANK", "99", 1);
    setenv("WORLD_SIZE", "99", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(path));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(path, argv.data());
    _exit(126);
  }
  close(outPipe[1]);
  close(errPipe[1]);

  Run run;
  bool signalled = when.sig == 0, hardKilled = false;
  int fds[2] = {outPipe[0], errPipe[0]};
  std::string* dst[2] = {&run.out, &run.err};
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    poll(p, 2, 20);
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || p[i].revents == 0) continue;
      char buf[65536];
      ssize_t r = read(fds[i], buf, sizeof buf);
      if (r > 0) {
        dst[i]->append(buf, size_t(r));
      } else if (r == 0 || errno != EINTR) {
        close(fds[i]);
        fds[i] = -1;
      }
    }
    if (!signalled) {
      bool ready = true;
      for (const auto& f : when.waitFiles) ready = ready && fileExists(f);
      if (ready) {
        kill(pid, when.sig);
        signalled = true;
      }
    }
    if (!hardKilled && Clock::now() - start > std::chrono::seconds(20)) {
      kill(pid, SIGKILL);
      hardKilled = true;
    }
  }
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  run.secs = std::chrono::duration<double>(Clock::now() - start).count();
  run.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  INFO("fcrun stdout:\n" << run.out << "\nfcrun stderr:\n" << run.err);
  REQUIRE_FALSE(hardKilled);
  return run;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

// Splits "[rank R] text" lines by rank; FAILs on a line without that prefix.
std::map<int, std::vector<std::string>> byRank(const std::string& s) {
  std::map<int, std::vector<std::string>> m;
  for (const auto& l : lines(s)) {
    int rank = -1, used = 0;
    INFO("line: " << l);
    REQUIRE(sscanf(l.c_str(), "[rank %d] %n", &rank, &used) == 1);
    REQUIRE(used > 0);
    m[rank].push_back(l.substr(size_t(used)));
  }
  return m;
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// A process is gone when it no longer exists or is a zombie (orphaned grandchildren
// are reparented to init, which in some containers never reaps them).
bool processAlive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = all.rfind(')');
  return paren == std::string::npos || paren + 2 >= all.size() || all[paren + 2] != 'Z';
}

// A fresh temporary directory, removed (with its plain files) at scope exit.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/test_fcrun.XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    const std::string cmd = "rm -rf '" + path + "'";
    const int rc = std::system(cmd.c_str());
    (void)rc;
  }
  pid_t readPid(const std::string& name) const {
    std::ifstream f(path + "/" + name);
    long pid = -1;
    f >> pid;
    return pid_t(pid);
  }
};

// Shell snippet: record this process's pid as DIR/pid.$FC_RANK, atomically.
std::string writePid(const TempDir& d, const std::string& pidExpr = "$$") {
  return "echo " + pidExpr + " > " + d.path + "/tmp.$FC_RANK && mv " + d.path +
         "/tmp.$FC_RANK " + d.path + "/pid.$FC_RANK; ";
}

}  // namespace

TEST_CASE("fcrun gives every rank its rank, the world size and one shared unique id", "[fcrun]") {
  const Run r = runFcrun({"-n", "3", "--", "sh", "-c",
                          "echo $FC_RANK $FC_WORLD_SIZE $FC_LOCAL_RANK $FC_LOCAL_WORLD_SIZE "
                          "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE "
                          "${CUDA_VISIBLE_DEVICES-unset} $FC_UNIQUE_ID"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.status == 0);
  const auto m = byRank(r.out);
  REQUIRE(m.size() == 3);
  std::set<std::string> ids;
  for (const auto& [rank, ls] : m) {
    REQUIRE(ls.size() == 1);
    std::istringstream in(ls[0]);
    int fcRank, fcWorld, fcLocal, fcLocalWorld, pRank, pWorld, pLocal, pLocalWorld;
    std::string cvd, id;
    in >> fcRank >> fcWorld >> fcLocal >> fcLocalWorld >> pRank >> pWorld >> pLocal >> pLocalWorld >>
        cvd >> id;
    REQUIRE(in);
    CHECK(fcRank == rank);
    CHECK(pRank == rank);
    CHECK(fcLocal == rank);
    CHECK(pLocal == rank);
    CHECK(fcWorld == 3);
    CHECK(pWorld == 3);
    CHECK(fcLocalWorld == 3);
    CHECK(pLocalWorld == 3);
    CHECK(cvd == "unset");
    REQUIRE(id.size() == 256);
    CHECK(id.find_first_not_of("0123456789abcdef") == std::string::npos);
    fcUniqueId parsed;
    CHECK(fcUniqueIdFromHex(id.c_str(), &parsed));
    ids.insert(id);
  }
  CHECK(m.count(0) + m.count(1) + m.count(2) == 3);
  CHECK(ids.size() == 1);

  // A second launch makes a new id.
  const Run r2 = runFcrun({"-n", "1", "--", "sh", "-c", "echo $FC_UNIQUE_ID"});
  REQUIRE(r2.status == 0);
  const auto m2 = byRank(r2.out);
  REQUIRE(m2.at(0).size() == 1);
  CHECK(m2.at(0)[0] != *ids.begin());
}

TEST_CASE("fcrun prefixes stdout and stderr lines separately, keeping partial lines", "[fcrun]") {
  const Run r = runFcrun({"-n", "2", "--", "sh", "-c",
                          "echo out$FC_RANK; echo err$FC_RANK >&2; printf 'a\\nb\\n'; "
                          "printf tail$FC_RANK"});
  REQUIRE(r.status == 0);
  const auto out = byRank(r.out);
  const auto err = byRank(r.err);
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i);
    CHECK(out.at(i) == std::vector<std::string>{"out" + n, "a", "b", "tail" + n});
    CHECK(err.at(i) == std::vector<std::string>{"err" + n});
  }
  CHECK(r.out.back() == '\n');  // the partial last line was completed

  // A long line without any newline arrives whole; ranks get /dev/null as stdin.
  const Run big = runFcrun({"-n", "1", "--", "sh", "-c",
                            "cat; head -c 200000 /dev/zero | tr '\\0' x"});
  REQUIRE(big.status == 0);
  CHECK(big.out == "[rank 0] " + std::string(200000, 'x') + "\n");
}

TEST_CASE("fcrun passes the arguments after -- through verbatim", "[fcrun]") {
  const std::string show = "printf '%s|' \"$@\"; echo";
  const Run r = runFcrun({"-n", "2", "--", "sh", "-c", show, "x", "-n", "5", "--foo", "--",
                          "a b", "", "--timeout", "3"});
  REQUIRE(r.status == 0);
  const auto m = byRank(r.out);
  REQUIRE(m.size() == 2);
  for (const auto& [rank, ls] : m) CHECK(ls == std::vector<std::string>{"-n|5|--foo|--|a b||--timeout|3|"});

  // Without "--", everything from PROGRAM on is still PROGRAM's.
  const Run r2 = runFcrun({"-n", "1", "sh", "-c", show, "x", "-n", "7", "--help"});
  REQUIRE(r2.status == 0);
  CHECK(byRank(r2.out).at(0) == std::vector<std::string>{"-n|7|--help|"});
}

TEST_CASE("a failing rank stops the others and gives fcrun its status", "[fcrun]") {
  TempDir d;
  // Rank 0 leaves a background grandchild in its group, rank 2 execs sleep itself; rank
  // 1 fails once both are known to be running.
  const std::string script =
      "if [ $FC_RANK = 0 ]; then sleep 30 & " + writePid(d, "$!") + "wait; fi; "
      "if [ $FC_RANK = 1 ]; then "
      "  while [ ! -e " + d.path + "/pid.0 ] || [ ! -e " + d.path + "/pid.2 ]; do sleep 0.02; done; "
      "  echo failing >&2; exit 3; fi; " +
      writePid(d) + "exec sleep 30";
  const Run r = runFcrun({"-n", "3", "--", "sh", "-c", script});
  INFO("stderr:\n" << r.err);
  CHECK(r.status == 3);
  CHECK(r.secs < 10);
  CHECK(contains(r.err, "fcrun: rank 1 exited with status 3"));
  CHECK(contains(r.err, "[rank 1] failing"));
  const pid_t p0 = d.readPid("pid.0"), p2 = d.readPid("pid.2");
  REQUIRE(p0 > 0);
  REQUIRE(p2 > 0);
  CHECK_FALSE(processAlive(p0));
  CHECK_FALSE(processAlive(p2));
}

TEST_CASE("--keep-going lets the other ranks finish and still reports the failure", "[fcrun]") {
  // Rank 1 dies from SIGKILL first; ranks 0 and 2 keep running and report afterwards.
  const std::string script =
      "if [ $FC_RANK = 1 ]; then kill -9 $$; fi; sleep 0.5; echo survived";
  const Run r = runFcrun({"-n", "3", "--keep-going", "--", "sh", "-c", script});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status == 128 + 9);
  CHECK(contains(r.out, "[rank 0] survived"));
  CHECK(contains(r.out, "[rank 2] survived"));
  CHECK_FALSE(contains(r.out, "[rank 1] survived"));
  CHECK(contains(r.err, "fcrun: rank 1 killed by signal 9"));
}

TEST_CASE("a rank killed by a signal gives 128+signal", "[fcrun]") {
  const Run r = runFcrun({"-n", "2", "--", "sh", "-c",
                          "if [ $FC_RANK = 0 ]; then kill -KILL $$; fi; exec sleep 30"});
  CHECK(r.status == 128 + SIGKILL);
  CHECK(r.secs < 10);
  CHECK(contains(r.err, "fcrun: rank 0 killed by signal 9"));
}

TEST_CASE("fcrun --timeout kills the ranks and exits 124", "[fcrun]") {
  const Run r = runFcrun({"-n", "2", "--timeout", "1", "--", "sleep", "30"});
  CHECK(r.status == 124);
  CHECK(r.secs >= 0.9);
  CHECK(r.secs < 4);
  CHECK(contains(r.err, "fcrun: timeout after 1 s, killed ranks 0 1"));

  // A rank that ignores SIGTERM gets SIGKILL after the grace period (2 s).
  const Run stubborn = runFcrun(
      {"-n", "1", "--timeout", "0.2", "--", "sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"});
  CHECK(stubborn.status == 124);
  CHECK(stubborn.secs < 5);
}

TEST_CASE("SIGTERM to fcrun terminates the ranks and exits 143", "[fcrun]") {
  TempDir d;
  SignalWhen when;
  when.waitFiles = {d.path + "/pid.0", d.path + "/pid.1"};
  when.sig = SIGTERM;
  const Run r = runFcrun({"-n", "2", "--", "sh", "-c", writePid(d) + "exec sleep 30"}, when);
  CHECK(r.status == 143);
  CHECK(r.secs < 10);
  for (const char* f : {"pid.0", "pid.1"}) {
    const pid_t p = d.readPid(f);
    REQUIRE(p > 0);
    CHECK_FALSE(processAlive(p));
  }
}

TEST_CASE("exec failure gives 127", "[fcrun]") {
  const Run r = runFcrun({"-n", "2", "--", "/nonexistent/fcrun-test-prog", "arg"});
  CHECK(r.status == 127);
  CHECK(contains(r.err, "fcrun: cannot exec /nonexistent/fcrun-test-prog: "));
}

TEST_CASE("exit status 77 (skipped) does not stop the other ranks", "[fcrun]") {
  SECTION("all 77 gives 77") {
    const Run r = runFcrun({"-n", "3", "--", "sh", "-c", "exit 77"});
    CHECK(r.status == 77);
  }
  SECTION("77 and 0 gives 77, and the other ranks run to the end") {
    const Run r = runFcrun({"-n", "3", "--", "sh", "-c",
                            "[ $FC_RANK = 0 ] && exit 77; sleep 0.3; echo done"});
    CHECK(r.status == 77);
    const auto m = byRank(r.out);
    CHECK(m.count(0) == 0);
    CHECK(m.at(1) == std::vector<std::string>{"done"});
    CHECK(m.at(2) == std::vector<std::string>{"done"});
  }
  SECTION("77 and a failure gives the failure") {
    const Run r = runFcrun({"-n", "2", "--", "sh", "-c",
                            "[ $FC_RANK = 0 ] && exit 77; sleep 0.2; exit 5"});
    CHECK(r.status == 5);
  }
}

TEST_CASE("fcrun rejects bad usage", "[fcrun]") {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-n", "0", "--", "true"},
           {"-n", "65", "--", "true"},
           {"-n", "x", "--", "true"},
           {"-n", "2"},
           {"-n", "2", "--"},
           {"-n", "2", "--bogus", "true"},
           {"-n", "2", "--timeout", "-1", "--", "true"},
       }) {
    const Run r = runFcrun(args);
    INFO("args: " << args.size() << " first: " << args[0] << " " << args[1]);
    CHECK(r.status != 0);
    CHECK(r.out.empty());
    CHECK_FALSE(r.err.empty());
  }
}

TEST_CASE("without -n fcrun uses the CUDA device count, or says to pass -n", "[fcrun]") {
  const Run r = runFcrun({"--", "sh", "-c", "echo $FC_WORLD_SIZE"});
  if (r.status == 0) {  // a machine with GPUs: one rank per device
    const auto m = byRank(r.out);
    REQUIRE(!m.empty());
    for (const auto& [rank, ls] : m) CHECK(ls == std::vector<std::string>{std::to_string(m.size())});
  } else {
    CHECK(contains(r.err, "pass -n"));
    CHECK(r.out.empty());
  }
}

TEST_CASE("fc_env.h: unique id hex round trip and strict parsing", "[fc_env]") {
  fcUniqueId id;
  for (size_t i = 0; i < sizeof id.internal; ++i) id.internal[i] = char(i * 37 + 5);
  const std::string hex = fcUniqueIdToHex(id);
  REQUIRE(hex.size() == 256);
  CHECK(hex.substr(0, 4) == "052a");
  fcUniqueId back;
  REQUIRE(fcUniqueIdFromHex(hex.c_str(), &back));
  CHECK(memcmp(&back, &id, sizeof id) == 0);

  fcUniqueId untouched;
  memset(&untouched, 0x5a, sizeof untouched);
  fcUniqueId copy = untouched;
  for (const std::string& bad : {hex.substr(1), hex + "0", std::string(), " " + hex.substr(1),
                                 hex.substr(0, 255) + "g"}) {
    CHECK_FALSE(fcUniqueIdFromHex(bad.c_str(), &copy));
  }
  CHECK(memcmp(&copy, &untouched, sizeof copy) == 0);
  CHECK_FALSE(fcUniqueIdFromHex(nullptr, &copy));
  std::string upper = hex;
  for (char& c : upper) c = char(toupper(c));
  REQUIRE(fcUniqueIdFromHex(upper.c_str(), &back));
  CHECK(memcmp(&back, &id, sizeof id) == 0);

  setenv("FC_UNIQUE_ID", hex.c_str(), 1);
  CHECK(fcUniqueIdFromEnv(&back));
  unsetenv("FC_UNIQUE_ID");
  CHECK_FALSE(fcUniqueIdFromEnv(&back));
}

TEST_CASE("fc_env.h: fcEnvInt", "[fc_env]") {
  const char* name = "FC_TEST_ENV_INT";
  unsetenv(name);
  CHECK(fcEnvInt(name, 7) == 7);
  for (const auto& [value, want] : std::vector<std::pair<const char*, int>>{
           {"", 7}, {"12", 12}, {"-3", -3}, {" 4 ", 4}, {"x", 7}, {"5x", 7}, {"99999999999", 7}}) {
    setenv(name, value, 1);
    INFO("value '" << value << "'");
    CHECK(fcEnvInt(name, 7) == want);
  }
  unsetenv(name);
}
