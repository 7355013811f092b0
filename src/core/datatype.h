// Sizes of the public datatypes (shared by the API checks and the launchers).
#pragma once

#include <cstddef>

#include "fusedcomm.h"

namespace fc {

inline size_t dataTypeSize(fcDataType_t t) {
  switch (t) {
    case fcFloat16: return 2;
    case fcBfloat16: return 2;
    case fcFloat32: return 4;
  }
  return 0;  // unknown
}

}  // namespace fc
