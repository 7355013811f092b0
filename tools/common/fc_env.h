// fc_env.h - header-only helpers shared by the tools (fcrun, fc-bench) and tests:
// the text form of an fcUniqueId and small environment readers.
//
// fcrun makes one fcUniqueId and hands it to every rank as the environment variable
// FC_UNIQUE_ID, written as 256 lowercase hex characters (two per byte, in byte order).
// Environment variables cannot hold NUL bytes, hence the text form.
#ifndef FC_TOOLS_FC_ENV_H_
#define FC_TOOLS_FC_ENV_H_

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fusedcomm.h"

// The 128 bytes of id as 256 lowercase hex characters.
inline std::string fcUniqueIdToHex(const fcUniqueId& id) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * sizeof id.internal);
  for (char c : id.internal) {
    const unsigned char b = static_cast<unsigned char>(c);
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

namespace fc_env_detail {
// Value of one hex digit (either case), or -1.
inline int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace fc_env_detail

// Parses exactly 256 hex characters (nothing before or after, no whitespace) into *id.
// Strict on purpose: a truncated or padded id would otherwise surface much later as a
// confusing "bad magic"/checksum error inside fcCommInitRank. *id is written only on
// success.
inline bool fcUniqueIdFromHex(const char* hex, fcUniqueId* id) {
  if (hex == nullptr || id == nullptr) return false;
  const size_t n = sizeof id->internal;
  if (std::strlen(hex) != 2 * n) return false;
  fcUniqueId tmp;
  for (size_t i = 0; i < n; ++i) {
    const int hi = fc_env_detail::hexDigit(hex[2 * i]);
    const int lo = fc_env_detail::hexDigit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    tmp.internal[i] = static_cast<char>((hi << 4) | lo);
  }
  *id = tmp;
  return true;
}

// Reads the id that fcrun (or any other launcher) put into FC_UNIQUE_ID.
// false when the variable is unset or not a well-formed id.
inline bool fcUniqueIdFromEnv(fcUniqueId* id) {
  return fcUniqueIdFromHex(std::getenv("FC_UNIQUE_ID"), id);
}

// The int value of environment variable name, or def when it is unset, empty, not a
// whole decimal integer (surrounding blanks allowed), or out of int range.
inline int fcEnvInt(const char* name, int def) {
  const char* s = std::getenv(name);
  if (s == nullptr) return def;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (end == s || errno == ERANGE || v < INT_MIN || v > INT_MAX) return def;
  while (*end == ' ' || *end == '\t') ++end;
  if (*end != '\0') return def;
  return static_cast<int>(v);
}

#endif  // FC_TOOLS_FC_ENV_H_
