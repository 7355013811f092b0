#include "core/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace fc {
namespace {

struct Logger {
  LogLevel level = LogLevel::None;
  FILE* file = stderr;
  char host[64] = "";

  Logger() {
    gethostname(host, sizeof host - 1);
    if (const char* s = getenv("FC_DEBUG")) {
      if (!strcasecmp(s, "WARN")) level = LogLevel::Warn;
      else if (!strcasecmp(s, "INFO")) level = LogLevel::Info;
      else if (!strcasecmp(s, "TRACE")) level = LogLevel::Trace;
    }
    if (const char* f = getenv("FC_DEBUG_FILE"); f && level != LogLevel::None) {
      std::string path;
      for (const char* p = f; *p; ++p) {
        if (p[0] == '%' && p[1] == 'h') { path += host; ++p; }
        else if (p[0] == '%' && p[1] == 'p') { path += std::to_string(getpid()); ++p; }
        else path += *p;
      }
      if (FILE* out = fopen(path.c_str(), "a")) file = out;
    }
  }
};

Logger& logger() {
  static Logger l;  // thread-safe initialisation (C++11 magic statics)
  return l;
}

thread_local int tlsRank = -1;
std::mutex logMutex;

const char* levelName(LogLevel l) {
  switch (l) {
    case LogLevel::Warn: return "WARN";
    case LogLevel::Info: return "INFO";
    case LogLevel::Trace: return "TRACE";
    default: return "";
  }
}

}  // namespace

bool logEnabled(LogLevel level) { return level <= logger().level && level != LogLevel::None; }

void setLogRank(int rank) { tlsRank = rank; }

void log(LogLevel level, const char* fmt, ...) {
  if (!logEnabled(level)) return;
  Logger& l = logger();
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(logMutex);
  fprintf(l.file, "%s:%d:%d [fusedcomm] %s %s\n", l.host, (int)getpid(), tlsRank,
          levelName(level), msg);
  fflush(l.file);
}

}  // namespace fc
