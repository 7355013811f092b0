// fcrun - start N ranks of one program on this node, the way torchrun/mpirun do.
//
//   fcrun -n N [--timeout S] [--] PROGRAM ARGS...
//
// Every rank gets the same fcUniqueId (env FC_UNIQUE_ID, hex) plus its rank and the
// world size, in both fusedcomm's (FC_*) and PyTorch's spelling. Output lines are
// prefixed "[rank R] ". The first rank that fails takes the others down with it, so a
// crashed rank never leaves its peers spinning in a collective until their timeout.
//
// Process model: each rank is its own process group (so `sh -c` wrappers and their
// children are signalled together) and is killed by the kernel if fcrun itself dies
// (PR_SET_PDEATHSIG), so no rank outlives fcrun.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>

#include "fc_env.h"
#include "fusedcomm.h"

extern char** environ;

namespace {

constexpr int kMaxRanks = 64;
constexpr int kSkipStatus = 77;                // meson's "test skipped" exit status
constexpr auto kGrace = std::chrono::seconds(2);  // SIGTERM -> SIGKILL
constexpr auto kDrainLimit = std::chrono::seconds(1);  // see the end of runRanks
constexpr int kPollMs = 50;                    // how often we reap and check deadlines
constexpr size_t kMaxPending = 1 << 20;        // longest line we buffer before cutting it

using Clock = std::chrono::steady_clock;

// The last SIGINT/SIGTERM/SIGHUP sent to fcrun; the main loop acts on it. Only a flag is
// set here because almost nothing is async-signal-safe.
volatile sig_atomic_t g_signal = 0;
void onSignal(int sig) { g_signal = sig; }

// One output stream of a rank (its stdout or its stderr).
struct Stream {
  int fd = -1;          // read end of the pipe; -1 once closed
  int outFd = 1;        // where its lines go: fcrun's stdout or stderr
  std::string pending;  // bytes received after the last newline
};

struct Rank {
  pid_t pid = -1;  // also the id of its process group
  bool running = false;
  Stream out, err;
};

// Set when writing to our stdout (1) or stderr (2) failed, e.g. with EPIPE because the
// reader of `fcrun ... | head` went away. See pump().
bool g_outBroken[3] = {false, false, false};

// write(2) all of buf; on error marks fd broken and drops the rest.
void writeAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (fd >= 0 && fd <= 2) g_outBroken[fd] = true;
      return;
    }
    p += w;
    n -= size_t(w);
  }
}

// Writes every complete line of s.pending, each prefixed, and keeps the incomplete tail.
// With all = true (EOF) the tail is written too, completed with a newline. Lines go out
// in one write per batch so that lines of different ranks never interleave mid-line.
void emitLines(Stream& s, const std::string& prefix, bool all) {
  std::string batch;
  size_t start = 0;
  for (size_t nl; (nl = s.pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    batch += prefix;
    batch.append(s.pending, start, nl + 1 - start);
  }
  s.pending.erase(0, start);
  // A line longer than kMaxPending is cut rather than buffered without bound.
  if (!s.pending.empty() && (all || s.pending.size() >= kMaxPending)) {
    batch += prefix + s.pending + '\n';
    s.pending.clear();
  }
  if (!batch.empty()) writeAll(s.outFd, batch.data(), batch.size());
}

void closeStream(Stream& s, const std::string& prefix) {
  emitLines(s, prefix, /*all=*/true);
  close(s.fd);
  s.fd = -1;
}

// Reads what the pipe has now and forwards complete lines; closes the stream at EOF.
void pump(Stream& s, const std::string& prefix) {
  char buf[65536];
  ssize_t r = read(s.fd, buf, sizeof buf);
  if (r < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (r <= 0) {
    closeStream(s, prefix);
    return;
  }
  s.pending.append(buf, size_t(r));
  emitLines(s, prefix, /*all=*/false);
  // Nobody reads our output any more: close the rank's pipe too, so the rank gets
  // SIGPIPE on its next write exactly as it would in a plain pipeline (rather than
  // running on forever with its output thrown away).
  if (g_outBroken[s.outFd]) {
    close(s.fd);
    s.fd = -1;
    s.pending.clear();
  }
}

// The child's environment: ours, minus any stale copies of the variables we set, plus
// this rank's values. Built before fork so the child only has to exec.
std::vector<std::string> rankEnv(int rank, int nranks, const std::string& idHex) {
  const std::string r = std::to_string(rank), n = std::to_string(nranks);
  const std::vector<std::pair<const char*, std::string>> ours = {
      {"FC_UNIQUE_ID", idHex},   {"FC_RANK", r},   {"FC_WORLD_SIZE", n},
      {"FC_LOCAL_RANK", r},      {"FC_LOCAL_WORLD_SIZE", n},
      {"RANK", r},               {"WORLD_SIZE", n},
      {"LOCAL_RANK", r},         {"LOCAL_WORLD_SIZE", n},
  };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const auto& kv : ours) {
      const size_t len = strlen(kv.first);
      if (strncmp(*e, kv.first, len) == 0 && (*e)[len] == '=') replaced = true;
    }
    if (!replaced) env.emplace_back(*e);
  }
  for (const auto& kv : ours) env.push_back(std::string(kv.first) + "=" + kv.second);
  return env;
}

void writeStr(int fd, const char* s) { writeAll(fd, s, strlen(s)); }

// Starts one rank. Returns false (with a message printed) if pipes or fork failed.
bool startRank(int rank, int nranks, const std::string& idHex,
               const std::vector<std::string>& cmd, Rank* out) {
  std::vector<std::string> envStore = rankEnv(rank, nranks, idHex);
  std::vector<char*> envp, argv;
  for (auto& s : envStore) envp.push_back(&s[0]);
  envp.push_back(nullptr);
  for (const auto& s : cmd) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);

  // O_CLOEXEC: later ranks must not inherit this rank's pipe ends, or our read end would
  // not see EOF until every rank has exited.
  int outPipe[2], errPipe[2];
  if (pipe2(outPipe, O_CLOEXEC) != 0) {
    fprintf(stderr, "fcrun: pipe: %s\n", strerror(errno));
    return false;
  }
  if (pipe2(errPipe, O_CLOEXEC) != 0) {
    fprintf(stderr, "fcrun: pipe: %s\n", strerror(errno));
    close(outPipe[0]);
    close(outPipe[1]);
    return false;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "fcrun: fork: %s\n", strerror(errno));
    for (int fd : {outPipe[0], outPipe[1], errPipe[0], errPipe[1]}) close(fd);
    return false;
  }
  if (pid == 0) {
    // Child: only simple system calls between fork and exec.
    setpgid(0, 0);
    // Die with fcrun even if it is SIGKILLed (e.g. by a test harness timeout); the
    // getppid check closes the race where fcrun died before prctl ran.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    // Ignored signals and the mask survive exec; give the program a clean slate.
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // Ranks get no stdin: they run in background process groups, where reading the
    // terminal would stop them with SIGTTIN.
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(outPipe[1], 1);
    dup2(errPipe[1], 2);
    environ = envp.data();
    execvp(argv[0], argv.data());
    const char* why = strerror(errno);
    writeStr(2, "fcrun: cannot exec ");
    writeStr(2, argv[0]);
    writeStr(2, ": ");
    writeStr(2, why);
    writeStr(2, "\n");
    _exit(127);
  }
  // Parent. setpgid here too, so the group exists before we might signal it (whichever
  // of parent and child runs first); EACCES after the child's exec is harmless.
  setpgid(pid, pid);
  close(outPipe[1]);
  close(errPipe[1]);
  out->pid = pid;
  out->running = true;
  out->out.fd = outPipe[0];
  out->out.outFd = 1;
  out->err.fd = errPipe[0];
  out->err.outFd = 2;
  return true;
}

// Sends sig to the process group of every rank ever started, including ranks that have
// already exited: their groups may still hold background children.
void signalGroups(const std::vector<Rank>& ranks, int sig) {
  for (const Rank& r : ranks)
    if (r.pid > 0) kill(-r.pid, sig);
}

// Exit status of a rank in shell convention: 128+signal for a signal.
int shellStatus(int waitStatus) {
  if (WIFEXITED(waitStatus)) return WEXITSTATUS(waitStatus);
  if (WIFSIGNALED(waitStatus)) return 128 + WTERMSIG(waitStatus);
  return 1;
}

// Runs the ranks to completion and returns fcrun's exit status.
// keepGoing: a failing rank does not stop the others (fault-tolerance tests kill a
// rank on purpose and check what the survivors report); the first failure still
// decides the exit status.
int runRanks(int nranks, double timeoutS, bool keepGoing, const std::string& idHex,
             const std::vector<std::string>& cmd) {
  std::vector<Rank> ranks(size_t(nranks), Rank{});
  std::vector<std::string> prefixes;
  for (int i = 0; i < nranks; ++i) prefixes.push_back("[rank " + std::to_string(i) + "] ");

  // Stopping: the first reason to stop (a failed rank, the timeout, a signal to fcrun)
  // fixes the exit status; the ranks get SIGTERM, then SIGKILL after kGrace.
  int exitCode = -1;
  bool stopping = false, killed = false, sawSkip = false;
  Clock::time_point killAt;
  auto stopAll = [&](int code) {
    if (stopping) return;
    stopping = true;
    exitCode = code;
    signalGroups(ranks, SIGTERM);
    killAt = Clock::now() + kGrace;
  };

  const Clock::time_point start = Clock::now();
  for (int i = 0; i < nranks && !stopping; ++i)
    if (!startRank(i, nranks, idHex, cmd, &ranks[size_t(i)])) stopAll(1);

  bool allReaped = false;
  Clock::time_point drainUntil;
  for (;;) {
    // Reap every rank that has exited. WNOHANG polling (every kPollMs) is simpler than a
    // SIGCHLD self-pipe and loses nothing: exited children wait for us as zombies.
    int st = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
      for (int i = 0; i < nranks; ++i) {
        Rank& r = ranks[size_t(i)];
        if (r.pid != pid || !r.running) continue;
        r.running = false;
        const int code = shellStatus(st);
        if (code == 0) break;
        // 77 = skipped: not a failure, so the other ranks are left to finish.
        if (WIFEXITED(st) && code == kSkipStatus) {
          sawSkip = true;
          break;
        }
        if (stopping) break;  // a casualty of our own SIGTERM/SIGKILL: not news
        if (WIFSIGNALED(st))
          fprintf(stderr, "fcrun: rank %d killed by signal %d (%s)\n", i, WTERMSIG(st),
                  strsignal(WTERMSIG(st)));
        else
          fprintf(stderr, "fcrun: rank %d exited with status %d\n", i, code);
        if (keepGoing) {
          if (exitCode < 0) exitCode = code;
        } else {
          stopAll(code);
        }
        break;
      }
    }

    const Clock::time_point now = Clock::now();
    if (g_signal != 0) {
      const int sig = g_signal;
      g_signal = 0;
      if (!stopping) {
        fprintf(stderr, "fcrun: got %s, terminating ranks\n", strsignal(sig));
        stopAll(128 + sig);
      } else if (!killed) {  // a second ^C: stop waiting for the grace period
        signalGroups(ranks, SIGKILL);
        killed = true;
      }
    }
    bool anyRunning = false;
    for (const Rank& r : ranks) anyRunning |= r.running;

    if (timeoutS > 0 && !stopping && anyRunning &&
        now - start >= std::chrono::duration<double>(timeoutS)) {
      std::string which;
      for (int i = 0; i < nranks; ++i)
        if (ranks[size_t(i)].running) which += (which.empty() ? "" : " ") + std::to_string(i);
      fprintf(stderr, "fcrun: timeout after %g s, killed ranks %s\n", timeoutS, which.c_str());
      stopAll(124);
    }
    if (stopping && !killed && anyRunning && now >= killAt) {
      signalGroups(ranks, SIGKILL);
      killed = true;
    }

    // All ranks are gone. Kill whatever they left behind in their groups (no orphans),
    // then drain the pipes to EOF; kDrainLimit bounds the wait in case a process escaped
    // its group (setsid) and still holds a pipe open.
    if (!anyRunning && !allReaped) {
      allReaped = true;
      signalGroups(ranks, SIGKILL);
      drainUntil = now + kDrainLimit;
    }

    std::vector<pollfd> fds;
    std::vector<std::pair<Stream*, const std::string*>> owners;
    for (int i = 0; i < nranks; ++i) {
      for (Stream* s : {&ranks[size_t(i)].out, &ranks[size_t(i)].err}) {
        if (s->fd < 0) continue;
        fds.push_back(pollfd{s->fd, POLLIN, 0});
        owners.emplace_back(s, &prefixes[size_t(i)]);
      }
    }
    if (allReaped && (fds.empty() || now >= drainUntil)) {
      for (auto& o : owners) closeStream(*o.first, *o.second);
      break;
    }
    // EINTR (a signal) just brings us back to the top of the loop early.
    if (poll(fds.data(), fds.size(), kPollMs) > 0) {
      for (size_t k = 0; k < fds.size(); ++k)
        if (fds[k].revents != 0) pump(*owners[k].first, *owners[k].second);
    }
  }

  if (exitCode >= 0) return exitCode;
  return sawSkip ? kSkipStatus : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fcrun: start N ranks of PROGRAM on this node, each with FC_UNIQUE_ID, "
               "FC_RANK, FC_WORLD_SIZE, FC_LOCAL_RANK, FC_LOCAL_WORLD_SIZE (and RANK, "
               "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) set.",
               "fcrun"};
  int nranks = 0;
  double timeoutS = 0;
  CLI::Option* nOpt = app.add_option("-n,--nranks", nranks,
                                     "number of ranks (default: number of visible CUDA devices)")
                          ->check(CLI::Range(1, kMaxRanks));
  app.add_option("--timeout", timeoutS, "kill all ranks after S seconds and exit 124 (0: never)")
      ->check(CLI::NonNegativeNumber);
  bool keepGoing = false;
  app.add_flag("--keep-going", keepGoing,
               "a failing rank does not stop the others (exit status: the first failure's)");
  // Everything from PROGRAM on is PROGRAM's, even arguments that look like our options:
  // prefix_command stops parsing at the first positional and leaves the rest (and a
  // leading "--") in remaining().
  app.prefix_command();
  app.footer(
      "Usage: fcrun -n N [--timeout S] [--keep-going] [--] PROGRAM ARGS...\n"
      "Output lines are prefixed \"[rank R] \". The first rank that fails (non-zero status\n"
      "other than 77, or a signal) stops the others; fcrun exits with its status (128+signal\n"
      "for a signal). All ranks exiting 77 (or 77 and 0) gives 77.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  std::vector<std::string> cmd = app.remaining();
  if (!cmd.empty() && cmd[0] == "--") {
    cmd.erase(cmd.begin());
  } else if (!cmd.empty() && cmd[0].size() > 1 && cmd[0][0] == '-') {
    // Not after "--", so this is a misspelt fcrun option rather than a program.
    fprintf(stderr, "fcrun: unknown option %s (put PROGRAM after --)\n", cmd[0].c_str());
    return 2;
  }
  if (cmd.empty()) {
    fprintf(stderr, "fcrun: no PROGRAM given\nUsage: fcrun -n N [--timeout S] [--] PROGRAM ARGS...\n");
    return 2;
  }

  if (nOpt->count() == 0) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
      fprintf(stderr, "fcrun: no -n given and no CUDA device to count (%s); pass -n N\n",
              e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
      return 2;
    }
    if (count > kMaxRanks) {
      fprintf(stderr, "fcrun: %d CUDA devices, more than %d ranks; pass -n N\n", count, kMaxRanks);
      return 2;
    }
    nranks = count;
  }

  fcUniqueId id;
  const fcResult_t res = fcGetUniqueId(&id);
  if (res != fcSuccess) {
    fprintf(stderr, "fcrun: fcGetUniqueId: %s: %s\n", fcGetErrorString(res), fcGetLastError(nullptr));
    return 1;
  }

  // Handlers, not SIG_IGN, so that they reset to default in the ranks at exec. No
  // SA_RESTART: the signal should interrupt poll() so that we react at once.
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  // A closed stdout must not kill fcrun (that would orphan the ranks' output handling).
  signal(SIGPIPE, SIG_IGN);

  return runRanks(nranks, timeoutS, keepGoing, fcUniqueIdToHex(id), cmd);
}
