// The probe variant of the library (meson -Dprobes=true: config.cc built with FC_PROBES)
// honours the measurement-only switches that the shipped library refuses
// (test_api.cc, "the shipped library refuses the measurement-only switches"): what
// fc-bench's *stages modes and tools/probes rely on.
#include <cstdlib>
#include <utility>

#include <catch2/catch_test_macros.hpp>

#include "comm/comm.h"
#include "core/result.h"

namespace {

struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  const char* name_;
};

}  // namespace

TEST_CASE("the probe build honours the measurement-only switches", "[probes]") {
  {
    ScopedEnv env("FC_LAMPORT_STAGES", "push-only");
    fc::CommParams p;
    REQUIRE(fc::commParamsResolve(nullptr, &p) == fcSuccess);
    CHECK(p.lamportStages == (fc::kLamportFull & ~uint32_t(fc::kLamportSum)));
  }
  {
    // Each pack cleared as it is read, no sweep of the stale buffer.
    ScopedEnv env("FC_LAMPORT_STAGES", "clear-read");
    fc::CommParams p;
    REQUIRE(fc::commParamsResolve(nullptr, &p) == fcSuccess);
    CHECK(p.lamportStages == ((fc::kLamportFull & ~uint32_t(fc::kLamportReset)) | fc::kLamportClearRead));
  }
  {
    ScopedEnv env("FC_ARNORM_STAGES", "allreduce-only");
    fc::CommParams p;
    REQUIRE(fc::commParamsResolve(nullptr, &p) == fcSuccess);
    CHECK(p.normStages == (fc::kNormPush | fc::kNormSum | fc::kNormReset));
  }
  {
    ScopedEnv env("FC_AGMM_ENGINE_STAGES", "no-pull");
    fc::CommParams p;
    REQUIRE(fc::commParamsResolve(nullptr, &p) == fcSuccess);
    CHECK(p.agmmEngineStages == fc::EngineStages::NoPull);
  }
  {
    ScopedEnv env("FC_MMRS_ENGINE_STAGES", "gemm-only");
    fc::CommParams p;
    REQUIRE(fc::commParamsResolve(nullptr, &p) == fcSuccess);
    CHECK(p.mmrsEngineStages == fc::MmrsEngineStages::GemmOnly);
  }
  for (const auto& [name, want] : {std::pair{"local", fc::MmarEngineStages::Local},
                                   std::pair{"no-gather", fc::MmarEngineStages::NoGather},
                                   std::pair{"no-wait", fc::MmarEngineStages::NoWait},
                                   std::pair{"no-copy", fc::MmarEngineStages::NoCopy},
                                   std::pair{"gemm-only", fc::MmarEngineStages::GemmOnly},
                                   std::pair{"bare", fc::MmarEngineStages::Bare}}) {
    INFO(name);
    ScopedEnv env("FC_MMAR_ENGINE_STAGES", name);
    fc::CommParams p;
    REQUIRE(fc::commParamsResolve(nullptr, &p) == fcSuccess);
    CHECK(p.mmarEngineStages == want);
  }
}
