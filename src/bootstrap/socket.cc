#include "bootstrap/socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/result.h"

namespace fc::net {
namespace {

fcResult_t makeAddr(const std::string& name, sockaddr_un* addr, socklen_t* len) {
  memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (name.size() + 1 > sizeof addr->sun_path)
    return setError(fcInternalError, "socket name too long: %s", name.c_str());
  // Abstract namespace: sun_path starts with a NUL; the length counts the name only.
  memcpy(addr->sun_path + 1, name.data(), name.size());
  *len = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return fcSuccess;
}

// Wait until fd is readable/writable (events) or the deadline passes.
fcResult_t waitFd(int fd, short events, Deadline deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = deadline.msLeft();
    if (ms == 0) return setError(fcTimeout, "%s: timed out", what);
    int r = poll(&p, 1, ms);
    if (r > 0) return fcSuccess;  // ready, or HUP/ERR: the next I/O call reports it
    if (r == 0) continue;         // re-check the deadline
    if (errno != EINTR) return setError(fcSystemError, "%s: poll: %s", what, strerror(errno));
  }
}

}  // namespace

fcResult_t listenAbstract(const std::string& name, int* fd) {
  sockaddr_un addr;
  socklen_t len = 0;
  FC_CHECK(makeAddr(name, &addr, &len));
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  FC_SYS_CHECK(s, "socket(AF_UNIX)");
  if (bind(s, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(s, 128) != 0) {
    int e = errno;
    close(s);
    return setError(fcSystemError, "bind/listen on abstract socket @%s: %s%s", name.c_str(),
                    strerror(e),
                    e == EADDRINUSE ? " (is another communicator using this unique id?)" : "");
  }
  *fd = s;
  return fcSuccess;
}

fcResult_t connectAbstract(const std::string& name, Deadline deadline, int* fd) {
  sockaddr_un addr;
  socklen_t len = 0;
  FC_CHECK(makeAddr(name, &addr, &len));
  for (;;) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    FC_SYS_CHECK(s, "socket(AF_UNIX)");
    if (connect(s, reinterpret_cast<sockaddr*>(&addr), len) == 0) {
      *fd = s;
      return fcSuccess;
    }
    int e = errno;
    close(s);
    // Nobody listens yet (ECONNREFUSED) or the backlog is full (EAGAIN): retry.
    if (e != ECONNREFUSED && e != EAGAIN && e != ENOENT && e != EINTR)
      return setError(fcSystemError, "connect to @%s: %s", name.c_str(), strerror(e));
    if (deadline.expired())
      return setError(fcTimeout, "timed out connecting to the rendezvous socket @%s", name.c_str());
    usleep(5000);
  }
}

fcResult_t acceptOne(int listenFd, Deadline deadline, int* fd) {
  for (;;) {
    FC_CHECK(waitFd(listenFd, POLLIN, deadline, "accept"));
    int s = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (s >= 0) {
      *fd = s;
      return fcSuccess;
    }
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
      return setError(fcSystemError, "accept: %s", strerror(errno));
  }
}

fcResult_t sendAll(int fd, const void* buf, size_t bytes, Deadline deadline) {
  const char* p = static_cast<const char*>(buf);
  while (bytes > 0) {
    FC_CHECK(waitFd(fd, POLLOUT, deadline, "send"));
    ssize_t n = send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == EPIPE || errno == ECONNRESET)
        return setError(fcRemoteError, "send: the peer closed its connection");
      return setError(fcSystemError, "send: %s", strerror(errno));
    }
    p += n;
    bytes -= size_t(n);
  }
  return fcSuccess;
}

fcResult_t recvAll(int fd, void* buf, size_t bytes, Deadline deadline) {
  char* p = static_cast<char*>(buf);
  while (bytes > 0) {
    FC_CHECK(waitFd(fd, POLLIN, deadline, "recv"));
    ssize_t n = recv(fd, p, bytes, MSG_DONTWAIT);
    if (n == 0) return setError(fcRemoteError, "recv: the peer closed its connection");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET) return setError(fcRemoteError, "recv: the peer reset its connection");
      return setError(fcSystemError, "recv: %s", strerror(errno));
    }
    p += n;
    bytes -= size_t(n);
  }
  return fcSuccess;
}

namespace {
constexpr int kMaxFds = 64;
}

fcResult_t sendFds(int fd, const int* fds, int n, Deadline deadline) {
  if (n < 1 || n > kMaxFds) return setError(fcInternalError, "sendFds: bad count %d", n);
  char byte = 'F';  // SCM_RIGHTS needs at least one byte of ordinary data
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  memset(control, 0, sizeof control);
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * n);
  memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
  for (;;) {
    FC_CHECK(waitFd(fd, POLLOUT, deadline, "sendmsg(SCM_RIGHTS)"));
    ssize_t r = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r == 1) return fcSuccess;
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    return setError(r < 0 && errno == EPIPE ? fcRemoteError : fcSystemError,
                    "sendmsg(SCM_RIGHTS): %s", r < 0 ? strerror(errno) : "short write");
  }
}

fcResult_t recvFds(int fd, int* fds, int n, Deadline deadline) {
  if (n < 1 || n > kMaxFds) return setError(fcInternalError, "recvFds: bad count %d", n);
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t r;
  for (;;) {
    FC_CHECK(waitFd(fd, POLLIN, deadline, "recvmsg(SCM_RIGHTS)"));
    r = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    break;
  }
  if (r == 0) return setError(fcRemoteError, "recvmsg: the peer closed its connection");
  if (r < 0) return setError(fcSystemError, "recvmsg(SCM_RIGHTS): %s", strerror(errno));
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c == nullptr || c->cmsg_type != SCM_RIGHTS || (msg.msg_flags & MSG_CTRUNC) ||
      c->cmsg_len != CMSG_LEN(sizeof(int) * n)) {
    // Close whatever did arrive so nothing leaks.
    for (; c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_type != SCM_RIGHTS) continue;
      int got = int((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      int tmp[kMaxFds];
      memcpy(tmp, CMSG_DATA(c), sizeof(int) * size_t(got < kMaxFds ? got : kMaxFds));
      for (int i = 0; i < got && i < kMaxFds; ++i) close(tmp[i]);
    }
    return setError(fcRemoteError, "recvmsg: expected %d file descriptors", n);
  }
  memcpy(fds, CMSG_DATA(c), sizeof(int) * n);
  return fcSuccess;
}

fcResult_t peerUid(int fd, uid_t* uid) {
  ucred cred{};
  socklen_t len = sizeof cred;
  FC_SYS_CHECK(getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len), "getsockopt(SO_PEERCRED)");
  *uid = cred.uid;
  return fcSuccess;
}

}  // namespace fc::net
