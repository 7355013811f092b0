#include "core/result.h"

#include <cstdarg>
#include <cstdio>
#include <algorithm>
#include <cstring>

#include "core/log.h"

namespace fc {
namespace {
thread_local char tlsLastError[1024] = "";
}

fcResult_t setError(fcResult_t res, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tlsLastError, sizeof tlsLastError, fmt, ap);
  va_end(ap);
  log(LogLevel::Warn, "%s: %s", fcGetErrorString(res), tlsLastError);
  return res;
}

fcResult_t addContext(fcResult_t res, const char* fmt, ...) {
  char ctx[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx, sizeof ctx, fmt, ap);
  va_end(ap);
  char old[sizeof tlsLastError];
  memcpy(old, tlsLastError, sizeof old);
  // Truncation is acceptable: the context comes first, the cause may be cut short.
  int n = snprintf(tlsLastError, sizeof tlsLastError, "%s: ", ctx);
  if (n > 0 && size_t(n) < sizeof tlsLastError)
    memcpy(tlsLastError + n, old, std::min(strlen(old) + 1, sizeof tlsLastError - size_t(n) - 1));
  tlsLastError[sizeof tlsLastError - 1] = '\0';
  return res;
}

void clearError() { tlsLastError[0] = '\0'; }

const char* lastError() { return tlsLastError; }

}  // namespace fc
