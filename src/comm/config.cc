// fcConfig_t resolution: the struct header is checked so that callers built against
// another version of the header get either a working config or a clear error.
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "comm/comm.h"
#include "core/env.h"
#include "core/result.h"

namespace fc {

namespace {
// The first published fcConfig_t ended after workspaceBytes; never shrink this.
constexpr size_t kMinConfigSize = offsetof(fcConfig_t, workspaceBytes) + sizeof(long long);

fcResult_t moveAlgoFromEnv(const char* name, MoveAlgo* algo) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fcSuccess;
  if (!strcmp(v, "auto")) *algo = MoveAlgo::Auto;
  else if (!strcmp(v, "sm")) *algo = MoveAlgo::Sm;
  else if (!strcmp(v, "ce")) *algo = MoveAlgo::CopyEngine;
  else return setError(fcInvalidArgument, "%s=%s: use sm, ce or auto", name, v);
  return fcSuccess;
}
fcResult_t fusedAlgoFromEnv(const char* name, FusedAlgo* algo) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fcSuccess;
  if (!strcmp(v, "auto")) *algo = FusedAlgo::Auto;
  else if (!strcmp(v, "fused")) *algo = FusedAlgo::Fused;
  else if (!strcmp(v, "unfused")) *algo = FusedAlgo::Unfused;
  else return setError(fcInvalidArgument, "%s=%s: use fused, unfused or auto", name, v);
  return fcSuccess;
}
}  // namespace

fcResult_t commParamsResolve(const fcConfig_t* config, CommParams* p) {
  uint64_t channels = 0;
  FC_CHECK(envU64("FC_TIMEOUT_MS", p->timeoutMs, &p->timeoutMs));
  FC_CHECK(envU64("FC_WORKSPACE_BYTES", p->workspaceBytes, &p->workspaceBytes));
  FC_CHECK(envU64("FC_CHANNELS", uint64_t(p->channels), &channels));
  p->channels = channels > 64 ? 65 : int(channels);
  FC_CHECK(envU64("FC_LAMPORT_MAX_BYTES", 0, &p->lamportMaxBytes));
  if (p->lamportMaxBytes > kLamportSlotBytes)
    return setError(fcInvalidArgument, "FC_LAMPORT_MAX_BYTES=%llu exceeds the push slot (%zu bytes)",
                    (unsigned long long)p->lamportMaxBytes, kLamportSlotBytes);
  if (const char* algo = getenv("FC_ALLREDUCE_ALGO"); algo != nullptr && *algo != '\0') {
    if (!strcmp(algo, "auto")) p->allReduceAlgo = AllReduceAlgo::Auto;
    else if (!strcmp(algo, "oneshot")) p->allReduceAlgo = AllReduceAlgo::OneShot;
    else if (!strcmp(algo, "twoshot")) p->allReduceAlgo = AllReduceAlgo::TwoShot;
    else if (!strcmp(algo, "ce")) p->allReduceAlgo = AllReduceAlgo::CopyEngine;
    else return setError(fcInvalidArgument, "FC_ALLREDUCE_ALGO=%s: use oneshot, twoshot, ce or auto", algo);
  }
  FC_CHECK(moveAlgoFromEnv("FC_REDUCE_SCATTER_ALGO", &p->reduceScatterAlgo));
  FC_CHECK(moveAlgoFromEnv("FC_ALLGATHER_ALGO", &p->allGatherAlgo));
  FC_CHECK(fusedAlgoFromEnv("FC_AGMM_ALGO", &p->allGatherMatmulAlgo));
  FC_CHECK(fusedAlgoFromEnv("FC_MMRS_ALGO", &p->matmulReduceScatterAlgo));
  if (config != nullptr) {
    if (config->magic != FC_CONFIG_MAGIC)
      return setError(fcInvalidArgument,
                      "config: bad magic 0x%08x (initialise it with FC_CONFIG_INITIALIZER)",
                      config->magic);
    if (config->size < kMinConfigSize || config->size > sizeof(fcConfig_t))
      return setError(fcInvalidArgument,
                      "config: size %zu is not between %zu and %zu (built against another "
                      "libfusedcomm header?)",
                      config->size, kMinConfigSize, sizeof(fcConfig_t));
    // Fields beyond config->size (an older caller) keep their defaults.
    if (config->blocking != FC_CONFIG_UNSET) {
      if (config->blocking != 0 && config->blocking != 1)
        return setError(fcInvalidArgument, "config.blocking must be 0 or 1, not %d", config->blocking);
      p->blocking = config->blocking == 1;
    }
    if (config->maxCtas != FC_CONFIG_UNSET) p->maxCtas = config->maxCtas;
    if (config->channels != FC_CONFIG_UNSET) p->channels = config->channels;
    if (config->timeoutMs != FC_CONFIG_UNSET) {
      if (config->timeoutMs <= 0)
        return setError(fcInvalidArgument, "config.timeoutMs must be > 0, not %lld", config->timeoutMs);
      p->timeoutMs = uint64_t(config->timeoutMs);
    }
    if (config->workspaceBytes != FC_CONFIG_UNSET) {
      if (config->workspaceBytes <= 0)
        return setError(fcInvalidArgument, "config.workspaceBytes must be > 0, not %lld",
                        config->workspaceBytes);
      p->workspaceBytes = uint64_t(config->workspaceBytes);
    }
  }
  if (p->timeoutMs == 0) return setError(fcInvalidArgument, "FC_TIMEOUT_MS must be > 0");
  if (p->workspaceBytes == 0) return setError(fcInvalidArgument, "FC_WORKSPACE_BYTES must be > 0");
  if (p->workspaceBytes > (1ull << 40))
    return setError(fcInvalidArgument, "workspace of %llu bytes is over 1 TiB",
                    (unsigned long long)p->workspaceBytes);
  p->workspaceBytes = (p->workspaceBytes + 15) / 16 * 16;
  if (p->maxCtas < 1 || p->maxCtas > kMaxBlocks)
    return setError(fcInvalidArgument, "maxCtas %d is not in [1, %d]", p->maxCtas, kMaxBlocks);
  if (p->channels < 1 || p->channels > kMaxChannels)
    return setError(fcInvalidArgument, "channels (FC_CHANNELS) %d is not in [1, %d]", p->channels,
                    kMaxChannels);
  return fcSuccess;
}

}  // namespace fc
