// Blocking AF_UNIX stream sockets with deadlines: the transport under the bootstrap.
// Every call that can block takes a Deadline and returns fcTimeout once it passes;
// a peer that closes its end gives fcRemoteError. Sockets live in the abstract
// namespace (no file to clean up, gone when the last fd closes).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "core/clock.h"
#include "fusedcomm.h"

namespace fc::net {

// Bind and listen on the abstract name "\0<name>". Fails (fcSystemError) if the name
// is taken, e.g. by another communicator made from the same unique id.
fcResult_t listenAbstract(const std::string& name, int* fd);

// Connect to "\0<name>", retrying while nobody listens yet, until the deadline.
fcResult_t connectAbstract(const std::string& name, Deadline deadline, int* fd);

// Accept one connection; fcTimeout when none comes before the deadline.
fcResult_t acceptOne(int listenFd, Deadline deadline, int* fd);

fcResult_t sendAll(int fd, const void* buf, size_t bytes, Deadline deadline);
fcResult_t recvAll(int fd, void* buf, size_t bytes, Deadline deadline);

// Send / receive n file descriptors (1 <= n <= 64) in one SCM_RIGHTS message.
// The receiver owns the new descriptors.
fcResult_t sendFds(int fd, const int* fds, int n, Deadline deadline);
fcResult_t recvFds(int fd, int* fds, int n, Deadline deadline);

// The uid of the process at the other end (SO_PEERCRED).
fcResult_t peerUid(int fd, uid_t* uid);

}  // namespace fc::net
