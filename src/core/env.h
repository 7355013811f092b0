// Environment parameters (FC_*). Parsing is strict: a malformed value is reported,
// not silently replaced by the default.
#pragma once

#include <cstdint>

#include "fusedcomm.h"

namespace fc {

// *out = the integer value of env var `name`, or `def` when it is unset or empty.
// A value that is not a non-negative integer (suffixes K, M, G are accepted for
// byte sizes) gives fcInvalidArgument naming the variable.
fcResult_t envU64(const char* name, uint64_t def, uint64_t* out);

}  // namespace fc
