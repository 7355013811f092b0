// The public C API without a GPU: version, error strings, the thread-local last
// error, unique ids, and every argument check that runs before the device is touched.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fusedcomm.h"

extern "C" int fc_header_c99_probe(void);
int fc_header_cxx17_probe();

using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;

namespace {

std::string lastError() {
  const char* s = fcGetLastError(nullptr);
  REQUIRE(s != nullptr);
  return s;
}

// A non-NULL value that must be overwritten with NULL by a rejected fcCommInitRank.
fcComm_t sentinelComm() { return reinterpret_cast<fcComm_t>(uintptr_t(0x5a5a5a50)); }

fcUniqueId goodId() {
  fcUniqueId id;
  REQUIRE(fcGetUniqueId(&id) == fcSuccess);
  return id;
}

// Sets an environment variable for one scope and restores the previous state.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) had_ = true, old_ = old;
    REQUIRE(setenv(name, value, 1) == 0);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// Whether a CUDA driver could be loaded here (then init gets further than on CI).
bool cudaDriverPresent() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

// The 32 random bytes of an id (rendezvous name and secret) and the secret alone.
constexpr size_t kRandomBegin = 8, kRandomEnd = 40, kSecretBegin = 24;

}  // namespace

TEST_CASE("the public header compiles as strict C99 and C++17 and binds every function", "[api][header]") {
  REQUIRE(fc_header_c99_probe() == FC_UNIQUE_ID_BYTES);
  REQUIRE(fc_header_cxx17_probe() == 0);
  REQUIRE(sizeof(fcUniqueId) == 128);
}

TEST_CASE("fcGetVersion", "[api]") {
  int v = -1;
  REQUIRE(fcGetVersion(&v) == fcSuccess);
  CHECK(v == FC_VERSION_CODE);
  CHECK(v == FC_MAJOR * 10000 + FC_MINOR * 100 + FC_PATCH);
  CHECK(lastError().empty());

  REQUIRE(fcGetVersion(nullptr) == fcInvalidArgument);
  const std::string msg = lastError();
  CHECK_FALSE(msg.empty());
  CHECK_THAT(msg, ContainsSubstring("version"));
  CHECK_THAT(msg, ContainsSubstring("NULL"));
}

TEST_CASE("fcGetErrorString: distinct, non-empty, and safe for unknown codes", "[api]") {
  std::set<std::string> seen;
  for (int r = 0; r < fcNumResults; ++r) {
    const char* s = fcGetErrorString(static_cast<fcResult_t>(r));
    REQUIRE(s != nullptr);
    INFO("result code " << r << ": \"" << s << "\"");
    CHECK(std::strlen(s) > 0);
    CHECK(std::string(s).find("unknown") == std::string::npos);
    CHECK(seen.insert(s).second);  // distinct from every other code's
  }
  CHECK(seen.size() == size_t(fcNumResults));
  for (int bad : {int(fcNumResults), 11, 12345, -1, INT32_MAX, INT32_MIN}) {
    const char* s = fcGetErrorString(static_cast<fcResult_t>(bad));
    INFO("result code " << bad);
    REQUIRE(s != nullptr);
    CHECK_THAT(std::string(s), ContainsSubstring("unknown"));
    CHECK(seen.count(s) == 0);
  }
}

TEST_CASE("fcGetLastError: cleared by every call, set by failures, per thread", "[api]") {
  int v = 0;
  REQUIRE(fcGetVersion(&v) == fcSuccess);
  CHECK(lastError().empty());
  CHECK(fcGetLastError(sentinelComm()) != nullptr);  // comm is not dereferenced

  REQUIRE(fcGetVersion(nullptr) == fcInvalidArgument);
  const std::string mine = lastError();
  REQUIRE_FALSE(mine.empty());
  CHECK(lastError() == mine);  // reading it does not clear it

  // A success in this thread clears the message ...
  fcUniqueId id;
  REQUIRE(fcGetUniqueId(&id) == fcSuccess);
  CHECK(lastError().empty());
  // ... and the next failure replaces it.
  REQUIRE(fcGetUniqueId(nullptr) == fcInvalidArgument);
  CHECK_THAT(lastError(), ContainsSubstring("uniqueId"));
  REQUIRE(fcGetVersion(nullptr) == fcInvalidArgument);
  REQUIRE(lastError() == mine);

  // Another thread starts with "" and its failures and successes leave ours alone.
  std::string otherInitial, otherAfterFailure, otherAfterSuccess;
  std::thread t([&] {
    otherInitial = fcGetLastError(nullptr);
    fcGetUniqueId(nullptr);
    otherAfterFailure = fcGetLastError(nullptr);
    int w;
    fcGetVersion(&w);
    otherAfterSuccess = fcGetLastError(nullptr);
  });
  t.join();
  CHECK(otherInitial.empty());
  CHECK_THAT(otherAfterFailure, ContainsSubstring("uniqueId"));
  CHECK(otherAfterSuccess.empty());
  CHECK(lastError() == mine);

  // Many threads failing concurrently each see their own message.
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&ok, i] {
      for (int k = 0; k < 200; ++k) {
        const bool version = ((i + k) % 2) == 0;
        fcResult_t r = version ? fcGetVersion(nullptr) : fcGetUniqueId(nullptr);
        const char* m = fcGetLastError(nullptr);
        if (r != fcInvalidArgument || std::strstr(m, version ? "version" : "uniqueId") == nullptr)
          return;
      }
      ok[size_t(i)] = 1;
    });
  for (auto& th : threads) th.join();
  for (int i = 0; i < 8; ++i) CHECK(ok[size_t(i)] == 1);
  CHECK(lastError() == mine);
}

TEST_CASE("fcGetUniqueId: distinct ids with random name and secret", "[api][uniqueid]") {
  REQUIRE(fcGetUniqueId(nullptr) == fcInvalidArgument);
  CHECK_THAT(lastError(), ContainsSubstring("uniqueId"));

  constexpr int kIds = 1000;
  std::vector<fcUniqueId> ids(kIds);
  for (auto& id : ids) {
    std::memset(&id, 0xee, sizeof id);
    REQUIRE(fcGetUniqueId(&id) == fcSuccess);
  }
  CHECK(lastError().empty());

  std::set<std::string> whole, randomPart, secrets, names;
  for (const auto& id : ids) {
    whole.insert(std::string(id.internal, sizeof id.internal));
    randomPart.insert(std::string(id.internal + kRandomBegin, kRandomEnd - kRandomBegin));
    names.insert(std::string(id.internal + kRandomBegin, kSecretBegin - kRandomBegin));
    secrets.insert(std::string(id.internal + kSecretBegin, kRandomEnd - kSecretBegin));
  }
  CHECK(whole.size() == size_t(kIds));
  CHECK(randomPart.size() == size_t(kIds));
  CHECK(names.size() == size_t(kIds));    // no two ids share a rendezvous name
  CHECK(secrets.size() == size_t(kIds));  // no two ids share a secret

  // Every random byte position takes many values (1000 uniform draws of 256 values
  // cover ~251 on average; a constant, counter or low-entropy byte covers few), and
  // the bits overall are balanced.
  size_t ones = 0;
  for (size_t pos = kRandomBegin; pos < kRandomEnd; ++pos) {
    std::set<unsigned char> values;
    for (const auto& id : ids) {
      const unsigned char b = static_cast<unsigned char>(id.internal[pos]);
      values.insert(b);
      ones += size_t(__builtin_popcount(b));
    }
    INFO("byte offset " << pos);
    CHECK(values.size() >= 200);
  }
  const double bits = double(kIds) * double(kRandomEnd - kRandomBegin) * 8.0;
  CHECK(double(ones) / bits > 0.48);
  CHECK(double(ones) / bits < 0.52);

  // The non-random header of the id (magic, version) is the same in every id.
  for (const auto& id : ids) CHECK(std::memcmp(id.internal, ids[0].internal, kRandomBegin) == 0);
}

TEST_CASE("fcCommInitRank rejects bad arguments before touching the GPU", "[api][init]") {
  const fcUniqueId id = goodId();

  REQUIRE(fcCommInitRank(nullptr, 2, id, 0) == fcInvalidArgument);
  CHECK_THAT(lastError(), ContainsSubstring("comm"));

  struct Case {
    int nranks, rank;
    const char* mention;
  };
  for (const Case& c : {Case{0, 0, "nranks"}, Case{-1, 0, "nranks"}, Case{17, 0, "nranks"},
                        Case{INT32_MIN, 0, "nranks"}, Case{2, -1, "rank"}, Case{2, 2, "rank"},
                        Case{1, 1, "rank"}, Case{16, 16, "rank"}, Case{4, INT32_MAX, "rank"}}) {
    INFO("nranks " << c.nranks << ", rank " << c.rank);
    fcComm_t comm = sentinelComm();
    REQUIRE(fcCommInitRank(&comm, c.nranks, id, c.rank) == fcInvalidArgument);
    CHECK(comm == nullptr);
    CHECK_THAT(lastError(), ContainsSubstring(c.mention));
  }
}

TEST_CASE("fcCommInitRank rejects ids not made by fcGetUniqueId", "[api][init][uniqueid]") {
  SECTION("all zero") {
    fcUniqueId id;
    std::memset(&id, 0, sizeof id);
    fcComm_t comm = sentinelComm();
    REQUIRE(fcCommInitRank(&comm, 2, id, 0) == fcInvalidArgument);
    CHECK(comm == nullptr);
    CHECK_THAT(lastError(), ContainsSubstring("unique id"));
  }
  SECTION("random bytes") {
    std::mt19937_64 rng(12345);
    for (int i = 0; i < 100; ++i) {
      fcUniqueId id;
      for (char& b : id.internal) b = char(rng());
      fcComm_t comm = sentinelComm();
      INFO("random id #" << i);
      REQUIRE(fcCommInitRank(&comm, 2, id, 1) == fcInvalidArgument);
      CHECK(comm == nullptr);
      CHECK_THAT(lastError(), ContainsSubstring("unique id"));
    }
  }
  SECTION("a valid id with one byte flipped") {
    const fcUniqueId good = goodId();
    // The first 64 bytes (header, name, secret, pid, checksum): any single corrupted
    // byte among them must be caught, not sent to a rendezvous. (The last 64, the
    // maker's host, only serve a message: a damaged record is ignored, test_bootstrap.cc.)
    for (size_t pos = 0; pos < 64; ++pos) {
      for (unsigned char mask : {0x01, 0x80, 0xff}) {
        fcUniqueId id = good;
        id.internal[pos] = char(static_cast<unsigned char>(id.internal[pos]) ^ mask);
        fcComm_t comm = sentinelComm();
        INFO("byte " << pos << " xor 0x" << std::hex << int(mask));
        REQUIRE(fcCommInitRank(&comm, 2, id, 0) == fcInvalidArgument);
        CHECK(comm == nullptr);
        CHECK_THAT(lastError(), ContainsSubstring("unique id"));
      }
    }
  }
}

TEST_CASE("fcCommInitRank validates its FC_* environment variables", "[api][init][env]") {
  const fcUniqueId id = goodId();
  struct Case {
    const char* var;
    const char* value;
  };
  for (const Case& c : {Case{"FC_TIMEOUT_MS", "abc"}, Case{"FC_TIMEOUT_MS", "-5"},
                        Case{"FC_TIMEOUT_MS", "10x"}, Case{"FC_TIMEOUT_MS", "0"},
                        Case{"FC_WORKSPACE_BYTES", "lots"}, Case{"FC_WORKSPACE_BYTES", "0"},
                        Case{"FC_ALLREDUCE_ALGO", "ring"}, Case{"FC_REDUCE_SCATTER_ALGO", "dma"},
                        Case{"FC_ALLGATHER_ALGO", "CE"}, Case{"FC_ALLGATHER_ALGO", "lamport"},
                        Case{"FC_AGMM_ALGO", "yes"},
                        Case{"FC_MMRS_ALGO", "1"}, Case{"FC_MMRS_ALGO", "persistent"}, Case{"FC_LAMPORT_STAGES", "push"},
                        Case{"FC_ARNORM_STAGES", "norm"}, Case{"FC_ARNORM_STAGES", "prefetch"},
                        Case{"FC_MAX_CTAS", "many"}, Case{"FC_MAX_CTAS", "-1"},
                        Case{"FC_LAMPORT_SPINS", "fast"}, Case{"FC_ARNORM_CLUSTER_PACKS", "wide"},
                        Case{"FC_LAMPORT_MAX_BYTES", "8388608"}, Case{"FC_AGMM_ENGINE_PIECES", "0"},
                        Case{"FC_AGMM_ENGINE_KPIECES", "0"}, Case{"FC_AGMM_ENGINE_KPIECES", "17"},
                        Case{"FC_AGMM_ENGINE_PUSH", "dma"},
                        Case{"FC_AGMM_ENGINE_STAGES", "no-copy"}, Case{"FC_MMRS_ENGINE_STAGES", "no-wait"},
                        Case{"FC_MMAR_ENGINE_STAGES", "no-pull"}, Case{"FC_MMAR_ENGINE_STAGES", "epilogue-add"},
                        Case{"FC_MMAR_ENGINE_TILES", "256"}, Case{"FC_MMAR_ENGINE_TILES", "128x64"},
                        Case{"FC_AGMM_ENGINE_TILES", "96"}, Case{"FC_AGMM_ENGINE_TILES", "128x112"},
                        Case{"FC_CHECK_POINTERS", "yes"}, Case{"FC_CHECK_POINTERS", "2"},
                        Case{"FC_CHECK_POINTERS", "off"}, Case{"FC_ENGINE_SMS", "3"}, Case{"FC_MMRS_ENGINE_PIECES", "17"},
                        Case{"FC_ENGINE_SMS", "half"}, Case{"FC_ARNORM_WIDE_CTAS", "2"},
                        Case{"FC_ARNORM_WIDE_CTAS", "yes"}, Case{"FC_ARNORM_GATHER_SET", "2"},
                        Case{"FC_ARNORM_ROW_CTAS", "1025"}, Case{"FC_ARNORM_ROW_CTAS", "all"},
                        Case{"FC_ARNORM_PASS_ALIGN", "2"}, Case{"FC_NORM_LOCAL_ROWS", "3"},
                        Case{"FC_NORM_LOCAL_ROWS", "8"}, Case{"FC_PDL_START_EDGE", "2"},
                        Case{"FC_DECODE_GEMM", "cutlass"}, Case{"FC_MMAR_ALGO", "decoder"},
                        Case{"FC_GEMV_STAGES", "1"}, Case{"FC_GEMV_STAGES", "8"},
                        Case{"FC_GEMV_ROTATE", "yes"}, Case{"FC_GEMV_ROW_COPIES", "2"},
                        Case{"FC_GEMV_WARPS_PER_TILE", "3"}, Case{"FC_GEMV_WARPS_PER_TILE", "16"},
                        Case{"FC_GEMV_PREFETCH", "3"}, Case{"FC_GEMV_PREFETCH", "-1"},
                        Case{"FC_GEMV_NORM", "1"}, Case{"FC_GEMV_NORM", "fused"}}) {
    INFO(c.var << "=" << c.value);
    const char* before = getenv(c.var);
    const bool had = before != nullptr;
    const std::string saved = had ? before : "";
    {
      ScopedEnv env(c.var, c.value);
      fcComm_t comm = sentinelComm();
      REQUIRE(fcCommInitRank(&comm, 2, id, 0) == fcInvalidArgument);
      CHECK(comm == nullptr);
      CHECK_THAT(lastError(), ContainsSubstring(c.var));
    }
    const char* now = getenv(c.var);  // restored
    CHECK((now != nullptr) == had);
    if (now != nullptr) CHECK(saved == now);
  }
}

TEST_CASE("fcCommInitRank accepts every documented algorithm choice", "[api][init][env]") {
  // Valid values pass the environment checks: init goes on to the device (no GPU in
  // CI: fcUnhandledCudaError; with one, a one-rank communicator).
  struct Case {
    const char* var;
    const char* value;
  };
  for (const Case& c : {Case{"FC_ALLREDUCE_ALGO", "oneshot"}, Case{"FC_ALLREDUCE_ALGO", "twoshot"},
                        Case{"FC_ALLREDUCE_ALGO", "ce"}, Case{"FC_ALLREDUCE_ALGO", "auto"},
                        Case{"FC_REDUCE_SCATTER_ALGO", "sm"}, Case{"FC_REDUCE_SCATTER_ALGO", "ce"},
                        Case{"FC_ALLGATHER_ALGO", "sm"}, Case{"FC_ALLGATHER_ALGO", "auto"},
                        Case{"FC_REDUCE_SCATTER_ALGO", "lamport"},
                        Case{"FC_AGMM_ALGO", "fused"}, Case{"FC_AGMM_ALGO", "unfused"},
                        Case{"FC_AGMM_ALGO", "engine"}, Case{"FC_MMRS_ALGO", "fused"},
                        Case{"FC_MMRS_ALGO", "auto"}, Case{"FC_CHECK_POINTERS", "0"},
                        Case{"FC_CHECK_POINTERS", "1"}, Case{"FC_MMRS_PARTIALS", "input"},
                        Case{"FC_MMRS_PARTIALS", "fp32"}, Case{"FC_ARNORM_STAGES", "full"},
                        Case{"FC_ARNORM_STAGES", "no-prefetch"}, Case{"FC_ARNORM_STAGES", "loop-row"},
                        Case{"FC_ARNORM_STAGES", "full-measured"}, Case{"FC_LAMPORT_STAGES", "full"},
                        Case{"FC_MAX_CTAS", "8"}, Case{"FC_LAMPORT_SPINS", "8"},
                        Case{"FC_ARNORM_CLUSTER_PACKS", "128"}, Case{"FC_LAMPORT_MAX_BYTES", "4194304"},
                        Case{"FC_ARNORM_WIDE_CTAS", "1"}, Case{"FC_ARNORM_WIDE_CTAS", "0"},
                        Case{"FC_ARNORM_ROW_CTAS", "512"}, Case{"FC_ARNORM_ROW_CTAS", "0"},
                        Case{"FC_ARNORM_GATHER_SET", "1"}, Case{"FC_ARNORM_PASS_ALIGN", "0"},
                        Case{"FC_NORM_LOCAL_ROWS", "4"}, Case{"FC_NORM_LOCAL_ROWS", "1"},
                        Case{"FC_AGMM_ENGINE_PIECES", "2"}, Case{"FC_AGMM_ENGINE_KPIECES", "4"},
                        Case{"FC_AGMM_ENGINE_PUSH", "sm"}, Case{"FC_AGMM_ENGINE_PUSH", "ce"}, Case{"FC_AGMM_ENGINE_STAGES", "full"},
                        Case{"FC_AGMM_ALGO", "pipeline"}, Case{"FC_MMRS_ALGO", "pipeline"},
                        Case{"FC_ARNORM_ALGO", "fused"}, Case{"FC_ARNORM_ALGO", "unfused"},
                        Case{"FC_ARNORM_ALGO", "twoshot"}, Case{"FC_AGMM_PASSES", "push"},
                        Case{"FC_AGMM_PASSES", "pull"}, Case{"FC_AGMM_PASSES", "push-own-first"},
                        Case{"FC_AGMM_AGATHERED", "beside"}, Case{"FC_AGMM_AGATHERED", "front"},
                        Case{"FC_MMRS_ENGINE_STAGES", "epilogue-add"},
                        Case{"FC_MMRS_ENGINE_STAGES", "full"}, Case{"FC_MMAR_ENGINE_STAGES", "full"},
                        Case{"FC_MMAR_ENGINE_TILES", "128x128"}, Case{"FC_MMAR_ENGINE_TILES", "128x256"},
                        Case{"FC_MMAR_ENGINE_TILES", "auto"}, Case{"FC_PDL_START_EDGE", "0"}, Case{"FC_DECODE_GEMM", "0"},
                        Case{"FC_AGMM_ENGINE_TILES", "128x96"}, Case{"FC_AGMM_ENGINE_TILES", "128x192"},
                        Case{"FC_AGMM_ENGINE_TILES", "auto"},
                        Case{"FC_MMAR_ALGO", "decode"}, Case{"FC_MMAR_ALGO", "engine"},
                        Case{"FC_ENGINE_SMS", "64"}, Case{"FC_MMRS_ENGINE_PIECES", "1"}, Case{"FC_ENGINE_SMS", "0"},
                        Case{"FC_MMRS_ENGINE_LEAD", "2"}, Case{"FC_MMRS_ENGINE_LEAD", "0"},
                        Case{"FC_MMRS_ENGINE_TILES", "auto"}, Case{"FC_GEMV_STAGES", "0"},
                        Case{"FC_GEMV_STAGES", "4"}, Case{"FC_GEMV_STAGES", "auto"}, Case{"FC_GEMV_ROTATE", "1"},
                        Case{"FC_GEMV_ROTATE", "0"}, Case{"FC_GEMV_ROW_COPIES", "1"},
                        Case{"FC_GEMV_ROW_COPIES", "auto"}, Case{"FC_GEMV_WARPS_PER_TILE", "4"},
                        Case{"FC_GEMV_WARPS_PER_TILE", "auto"}, Case{"FC_GEMV_PREFETCH", "4"},
                        Case{"FC_GEMV_PREFETCH", "0"}, Case{"FC_GEMV_NORM", "inside"},
                        Case{"FC_GEMV_NORM", "kernel"}, Case{"FC_GEMV_NORM", "auto"}}) {
    INFO(c.var << "=" << c.value);
    ScopedEnv env(c.var, c.value);
    fcComm_t comm = nullptr;
    fcUniqueId id;
    REQUIRE(fcGetUniqueId(&id) == fcSuccess);
    const fcResult_t r = fcCommInitRank(&comm, 1, id, 0);
    INFO(lastError());
    CHECK(r != fcInvalidArgument);
    CHECK_THAT(lastError(), !ContainsSubstring(c.var));
    if (r == fcSuccess) CHECK(fcCommDestroy(comm) == fcSuccess);
  }
}

// var=value refused by fcCommInitRank before the GPU, with a message naming the
// variable, its value, why, and the probe build (comm/config.cc).
static void expectRefusedAtInit(const char* var, const char* value, const char* why) {
  INFO(var << "=" << value);
  ScopedEnv env(var, value);
  fcUniqueId id;
  REQUIRE(fcGetUniqueId(&id) == fcSuccess);
  fcComm_t comm = sentinelComm();
  REQUIRE(fcCommInitRank(&comm, 1, id, 0) == fcInvalidUsage);
  CHECK(comm == nullptr);
  CHECK_THAT(lastError(), ContainsSubstring(var) && ContainsSubstring(value) && ContainsSubstring(why) &&
                              ContainsSubstring("-Dprobes=true"));
}

TEST_CASE("the shipped library refuses the measurement-only switches", "[api][init][env][probes]") {
  // Stage sets that leave stages out compute wrong results on purpose (fc-bench's
  // *stages modes): only the probe build (meson -Dprobes=true) honours them. The shipped
  // library, which this test links, refuses them at init, before the GPU, with a
  // message naming the variable and the probe build (comm/config.cc).
  struct Case {
    const char* var;
    const char* value;
  };
  for (const Case& c : {Case{"FC_LAMPORT_STAGES", "push-only"}, Case{"FC_LAMPORT_STAGES", "no-reset"},
                        Case{"FC_LAMPORT_STAGES", "sum-twice"}, Case{"FC_LAMPORT_STAGES", "clear-read"},
                        Case{"FC_LAMPORT_STAGES", "reset-call-warp"}, Case{"FC_LAMPORT_STAGES", "lean"},
                        Case{"FC_LAMPORT_STAGES", "late"}, Case{"FC_LAMPORT_STAGES", "narrow"},
                        Case{"FC_LAMPORT_STAGES", "wide"},
                        Case{"FC_ARNORM_STAGES", "allreduce-only"}, Case{"FC_ARNORM_STAGES", "timeline"},
                        Case{"FC_ARNORM_STAGES", "no-norm"}, Case{"FC_AGMM_ENGINE_STAGES", "no-wait"},
                        Case{"FC_AGMM_ENGINE_STAGES", "no-pull"}, Case{"FC_MMRS_ENGINE_STAGES", "no-gate"},
                        Case{"FC_MMRS_ENGINE_STAGES", "no-pull"}, Case{"FC_MMRS_ENGINE_STAGES", "gemm-only"},
                        Case{"FC_MMRS_ENGINE_STAGES", "epilogue-local"},
                        Case{"FC_MMAR_ENGINE_STAGES", "local"}, Case{"FC_MMAR_ENGINE_STAGES", "no-gather"},
                        Case{"FC_MMAR_ENGINE_STAGES", "no-wait"}, Case{"FC_MMAR_ENGINE_STAGES", "no-copy"},
                        Case{"FC_MMAR_ENGINE_STAGES", "gemm-only"}, Case{"FC_MMAR_ENGINE_STAGES", "bare"}}) {
    expectRefusedAtInit(c.var, c.value, "wrong results");
  }
}

TEST_CASE("the shipped library refuses the switches kept for measurements, each with its reason", "[api][init][env][probes]") {
  // Right results, but not for users: a tile shape outside the op's signature, pushed
  // partials right only where every rank's C is aligned, and Agathered from the GEMM's
  // stages, exact but slower than beside. Each refused at init with its reason.
  struct Case {
    const char* var;
    const char* value;
    const char* why;
  };
  for (const Case& c : {Case{"FC_MMRS_ENGINE_TILES", "128x256", "for measurements"},
                        Case{"FC_MMRS_ENGINE_TILES", "128x128", "for measurements"},
                        Case{"FC_MMRS_ENGINE_STAGES", "epilogue-push", "16-byte aligned"},
                        Case{"FC_AGMM_AGATHERED", "stages", "slower than beside"}}) {
    expectRefusedAtInit(c.var, c.value, c.why);
  }
}

TEST_CASE("fcCommInitRank with a valid id and no GPU fails fast and says why", "[api][init]") {
  if (cudaDriverPresent()) SKIP("a CUDA driver is installed here: the GPU suite tests init");
  const fcUniqueId id = goodId();
  // Were the device not checked first, the rendezvous would wait out this timeout.
  ScopedEnv env("FC_TIMEOUT_MS", "2000");
  for (int attempt = 0; attempt < 2; ++attempt) {  // the second call hits the cached driver state
    for (int rank : {0, 1}) {
      INFO("attempt " << attempt << ", rank " << rank);
      fcComm_t comm = sentinelComm();
      const auto t0 = std::chrono::steady_clock::now();
      const fcResult_t res = fcCommInitRank(&comm, 2, id, rank);
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
      const std::string msg = lastError();
      INFO("result " << int(res) << " after " << ms << " ms: " << msg);
      CHECK(res == fcUnhandledCudaError);
      CHECK(comm == nullptr);
      CHECK(ms < 1500);
      const bool explains = msg.find("driver") != std::string::npos ||
                            msg.find("device") != std::string::npos;
      CHECK(explains);
      CHECK_THAT(msg, ContainsSubstring("rank " + std::to_string(rank)));
    }
  }
}

TEST_CASE("communicator calls reject a NULL or dead comm", "[api][comm]") {
  int out = -7;
  SECTION("NULL") {
    CHECK(fcCommDestroy(nullptr) == fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("fcCommDestroy"));
    CHECK(fcCommCount(nullptr, &out) == fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("fcCommCount"));
    CHECK(fcCommUserRank(nullptr, &out) == fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("fcCommUserRank"));
    CHECK(fcCommCuDevice(nullptr, &out) == fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("fcCommCuDevice"));
    CHECK(fcCommCount(nullptr, nullptr) == fcInvalidArgument);
    CHECK(fcCommAbort(nullptr) == fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("fcCommAbort"));
    fcResult_t async = fcSuccess;
    CHECK(fcCommGetAsyncError(nullptr, &async) == fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("fcCommGetAsyncError"));
    CHECK(async == fcSuccess);  // untouched
    CHECK(fcBarrier(nullptr, nullptr) == fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("fcBarrier"));
    void* mem = &out;
    CHECK(fcMemAlloc(nullptr, &mem, 1024) == fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("fcMemAlloc"));
    CHECK(mem == &out);  // untouched: the comm was rejected first
    CHECK(fcMemFree(nullptr, mem) == fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("fcMemFree"));
    CHECK(fcAllGatherMatmul(&out, &out, &out, nullptr, 4, 4, 4, fcOpN, fcBfloat16, nullptr, nullptr) ==
          fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("fcAllGatherMatmul"));
    CHECK(fcMatmulReduceScatter(&out, &out, &out, 4, 4, 4, fcOpN, fcBfloat16, nullptr, nullptr) ==
          fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("fcMatmulReduceScatter"));
    CHECK(fcAllReduceResidualRMSNorm(&out, &out, &out, &out, &out, 1, 8, 1e-6f, fcBfloat16, nullptr, nullptr) ==
          fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("fcAllReduceResidualRMSNorm"));
    CHECK(out == -7);  // outputs untouched
  }
  SECTION("memory that is not a live communicator") {
    // Zeroed, suitably aligned memory: what a destroyed and recycled comm may look like.
    alignas(64) static unsigned char zeros[1 << 16];
    std::memset(zeros, 0, sizeof zeros);
    fcComm_t fake = reinterpret_cast<fcComm_t>(zeros);
    CHECK(fcCommCount(fake, &out) == fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("comm"));
    CHECK(fcCommUserRank(fake, &out) == fcInvalidArgument);
    CHECK(fcCommCuDevice(fake, &out) == fcInvalidArgument);
    CHECK(fcCommDestroy(fake) == fcInvalidArgument);
    CHECK(fcAllReduceOneShot(nullptr, nullptr, 0, fcBfloat16, fcSum, fake, nullptr) == fcInvalidArgument);
    CHECK(out == -7);
  }
}

TEST_CASE("fcAllReduceOneShot with a NULL comm", "[api][collective]") {
  float buf[4] = {1, 2, 3, 4};
  struct Case {
    const void* send;
    void* recv;
    size_t count;
    fcDataType_t type;
    fcRedOp_t op;
  };
  for (const Case& c : {Case{buf, buf, 4, fcFloat32, fcSum}, Case{nullptr, nullptr, 0, fcBfloat16, fcSum},
                        Case{buf, buf + 2, 2, fcFloat16, fcSum}, Case{nullptr, buf, 4, fcFloat32, fcSum},
                        Case{buf, buf, 4, static_cast<fcDataType_t>(3), fcSum},
                        Case{buf, buf, 4, fcFloat32, static_cast<fcRedOp_t>(7)}}) {
    INFO("count " << c.count << ", type " << int(c.type) << ", op " << int(c.op));
    REQUIRE(fcAllReduceOneShot(c.send, c.recv, c.count, c.type, c.op, nullptr, nullptr) ==
            fcInvalidArgument);
    CHECK_THAT(lastError(), ContainsSubstring("comm"));
    CHECK_THAT(lastError(), ContainsSubstring("fcAllReduceOneShot"));
  }
  CHECK(buf[0] == 1);
  CHECK(buf[3] == 4);
}

TEST_CASE("fcCommInitRankConfig validates the config before touching the GPU", "[api][init][config]") {
  const fcUniqueId id = goodId();
  fcComm_t comm = sentinelComm();
  auto rejected = [&](fcConfig_t cfg, const char* needle) {
    comm = sentinelComm();
    CHECK(fcCommInitRankConfig(&comm, 2, id, 0, &cfg) == fcInvalidArgument);
    CHECK(comm == nullptr);
    CHECK_THAT(lastError(), ContainsSubstring(needle));
  };
  fcConfig_t base = FC_CONFIG_INITIALIZER;
  CHECK(base.size == sizeof(fcConfig_t));
  CHECK(base.magic == FC_CONFIG_MAGIC);
  CHECK(base.version == unsigned(FC_VERSION_CODE));
  CHECK(base.blocking == FC_CONFIG_UNSET);
  CHECK(base.workspaceBytes == FC_CONFIG_UNSET);
  fcConfig_t c = base;
  c.magic = 0x12345678u;
  rejected(c, "magic");
  c = base;
  c.size = sizeof(fcConfig_t) + 8;  // a caller built against a newer, larger struct
  rejected(c, "size");
  c = base;
  c.size = 8;
  rejected(c, "size");
  c = base;
  c.maxCtas = 0;
  rejected(c, "maxCtas");
  c = base;
  c.maxCtas = 129;
  rejected(c, "maxCtas");
  c = base;
  c.channels = 9;
  rejected(c, "channels");
  c = base;
  c.blocking = 2;
  rejected(c, "blocking");
  c = base;
  c.timeoutMs = 0;
  rejected(c, "timeoutMs");
  c = base;
  c.workspaceBytes = -5;
  rejected(c, "workspaceBytes");
  c = base;
  c.scratchBytes = -2;  // -1 is FC_CONFIG_UNSET
  rejected(c, "scratchBytes");
  c = base;
  c.scratchBytes = 1ll << 41;
  rejected(c, "scratch");
  c = base;
  c.fp32Partials = 2;
  rejected(c, "fp32Partials");
  {
    ScopedEnv env("FC_MMRS_PARTIALS", "bf16");
    rejected(base, "FC_MMRS_PARTIALS");
  }
  {
    ScopedEnv env("FC_CHANNELS", "0");
    rejected(base, "channels");
  }
  for (const char* ctas : {"0", "129", "100000000000"}) {
    ScopedEnv env("FC_MAX_CTAS", ctas);
    rejected(base, "maxCtas");
  }
  {
    ScopedEnv env("FC_SCRATCH_BYTES", "lots");
    rejected(base, "FC_SCRATCH_BYTES");
  }
  // A caller built against 0.1's header (no scratchBytes) passes a shorter struct:
  // the field is not read (here it holds garbage that would be rejected).
  c = base;
  c.size = offsetof(fcConfig_t, scratchBytes);
  c.scratchBytes = -7;
  if (!cudaDriverPresent()) {
    comm = sentinelComm();
    CHECK(fcCommInitRankConfig(&comm, 2, id, 0, &c) == fcUnhandledCudaError);
    CHECK(comm == nullptr);
  }
  // A valid config gets as far as the (missing) driver.
  if (!cudaDriverPresent()) {
    ScopedEnv env("FC_TIMEOUT_MS", "2000");
    comm = sentinelComm();
    CHECK(fcCommInitRankConfig(&comm, 2, id, 0, &base) == fcUnhandledCudaError);
    CHECK(comm == nullptr);
    CHECK_THAT(lastError(), ContainsSubstring("driver"));
  }
}

TEST_CASE("fcCommInitAll rejects bad arguments", "[api][init]") {
  fcComm_t comms[2] = {sentinelComm(), sentinelComm()};
  CHECK(fcCommInitAll(nullptr, 2, nullptr) == fcInvalidArgument);
  CHECK_THAT(lastError(), ContainsSubstring("comms"));
  CHECK(fcCommInitAll(comms, 0, nullptr) == fcInvalidArgument);
  CHECK_THAT(lastError(), ContainsSubstring("ndev"));
  CHECK(fcCommInitAll(comms, 17, nullptr) == fcInvalidArgument);
  if (!cudaDriverPresent()) {
    // Without a driver no device can be counted: a CUDA error, and no comm left behind.
    CHECK(fcCommInitAll(comms, 2, nullptr) == fcUnhandledCudaError);
    CHECK(comms[0] == nullptr);
    CHECK(comms[1] == nullptr);
  }
}

TEST_CASE("FC_DEBUG and FC_DEBUG_FILE: levels, %h/%p expansion, host:pid:rank prefix", "[api][log]") {
  const char* probe = getenv("FC_LOG_PROBE");
  REQUIRE(probe != nullptr);
  char dir[] = "/tmp/fc-log-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  auto runProbe = [&](const char* level) {
    const std::string cmd = std::string("FC_DEBUG=") + level + " FC_DEBUG_FILE=" + dir +
                            "/fc.%h.%p.log " + probe + " >/dev/null; echo $?";
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[64] = {0};
    REQUIRE(fgets(buf, sizeof buf, p) != nullptr);
    pclose(p);
    CHECK(std::string(buf) == "0\n");
  };
  auto logFiles = [&]() {
    std::vector<std::string> files;
    if (DIR* d = opendir(dir)) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') files.push_back(std::string(dir) + "/" + e->d_name);
      closedir(d);
    }
    return files;
  };
  runProbe("NONE");
  CHECK(logFiles().empty());  // no file at all when logging is off
  runProbe("WARN");
  const std::vector<std::string> files = logFiles();
  REQUIRE(files.size() == 1);
  CHECK_THAT(files[0], ContainsSubstring(std::string("/fc.") + host + "."));
  std::ifstream in(files[0]);
  std::string line;
  REQUIRE(std::getline(in, line));
  // "host:pid:rank [fusedcomm] WARN invalid argument ...: fcGetVersion: version is NULL"
  CHECK_THAT(line, StartsWith(std::string(host) + ":"));
  CHECK_THAT(line, ContainsSubstring(":-1 [fusedcomm] WARN "));
  CHECK_THAT(line, ContainsSubstring("fcGetVersion: version is NULL"));
  for (const std::string& f : files) unlink(f.c_str());
  rmdir(dir);
}
