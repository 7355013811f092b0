// Logging controlled by FC_DEBUG (NONE, WARN, INFO, TRACE; default NONE) and
// FC_DEBUG_FILE (a path; %h expands to the host name, %p to the pid; default stderr).
// Every line starts with "host:pid:rank [fusedcomm] LEVEL".
#pragma once

namespace fc {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

bool logEnabled(LogLevel level);

// Log a printf-style message at `level`.
void log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// The rank printed in this thread's log prefix (-1: none yet). A communicator sets it
// for the duration of its calls.
void setLogRank(int rank);

}  // namespace fc

#define FC_INFO(...)                                                       \
  do {                                                                     \
    if (::fc::logEnabled(::fc::LogLevel::Info)) ::fc::log(::fc::LogLevel::Info, __VA_ARGS__); \
  } while (0)
#define FC_TRACE(...)                                                       \
  do {                                                                      \
    if (::fc::logEnabled(::fc::LogLevel::Trace)) ::fc::log(::fc::LogLevel::Trace, __VA_ARGS__); \
  } while (0)
