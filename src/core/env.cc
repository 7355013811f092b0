#include "core/env.h"

#include <cstdlib>

#include "core/result.h"

namespace fc {

fcResult_t envU64(const char* name, uint64_t def, uint64_t* out) {
  const char* s = getenv(name);
  if (s == nullptr || *s == '\0') {
    *out = def;
    return fcSuccess;
  }
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno != 0 || *s == '-')
    return setError(fcInvalidArgument, "%s=%s is not a non-negative integer", name, s);
  uint64_t scale = 1;
  if (*end == 'K' || *end == 'k') scale = 1ull << 10, ++end;
  else if (*end == 'M' || *end == 'm') scale = 1ull << 20, ++end;
  else if (*end == 'G' || *end == 'g') scale = 1ull << 30, ++end;
  if (*end != '\0' || (scale > 1 && v > UINT64_MAX / scale))
    return setError(fcInvalidArgument, "%s=%s is not a non-negative integer", name, s);
  *out = v * scale;
  return fcSuccess;
}

}  // namespace fc
