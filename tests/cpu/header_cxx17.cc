// The public header must also compile as strict C++17 (-std=c++17 -pedantic -Werror),
// with C linkage for every function, and agree with the C view of the ABI.
#include "fusedcomm.h"

#include <cstddef>
#include <type_traits>

static_assert(sizeof(fcUniqueId) == FC_UNIQUE_ID_BYTES, "fcUniqueId size");
static_assert(sizeof(fcConfig_t) == 64 && offsetof(fcConfig_t, workspaceBytes) == 40 &&
                  offsetof(fcConfig_t, scratchBytes) == 48 && offsetof(fcConfig_t, fp32Partials) == 56,
              "fcConfig_t layout");
static_assert(fcNumResults == 10 && fcBfloat16 == 9 && fcOpT == 1, "enum values");
static_assert(std::is_same<decltype(&fcAllGatherMatmul),
                           fcResult_t (*)(const void*, const void*, void*, void*, size_t, size_t, size_t,
                                          fcOperation_t, fcDataType_t, fcComm_t, cudaStream_t)>::value,
              "fcAllGatherMatmul signature");
static_assert(std::is_same<decltype(&fcMatmulReduceScatter),
                           fcResult_t (*)(const void*, const void*, void*, size_t, size_t, size_t, fcOperation_t,
                                          fcDataType_t, fcComm_t, cudaStream_t)>::value,
              "fcMatmulReduceScatter signature");

// The initializer works in C++ too.
const fcConfig_t kCxxDefaultConfig = FC_CONFIG_INITIALIZER;

int fc_header_cxx17_probe() { return kCxxDefaultConfig.size == sizeof(fcConfig_t) ? 0 : -1; }
