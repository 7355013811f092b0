// fcConfig_t resolution: the struct header is checked so that callers built against
// another version of the header get either a working config or a clear error.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "comm/comm.h"
#include "core/env.h"
#include "core/result.h"

namespace fc {

namespace {
// The first published fcConfig_t ended after workspaceBytes; never shrink this.
constexpr size_t kMinConfigSize = offsetof(fcConfig_t, workspaceBytes) + sizeof(long long);

// *out = the value named by env var `name` among `choices` (unchanged when the
// variable is unset or empty); anything else is fcInvalidArgument naming them all.
template <typename E, size_t N>
fcResult_t choiceFromEnv(const char* name, const std::pair<const char*, E> (&choices)[N], E* out) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fcSuccess;
  std::string names;
  for (const auto& [text, value] : choices) {
    if (!strcmp(v, text)) {
      *out = value;
      return fcSuccess;
    }
    names += names.empty() ? text : std::string(", ") + text;
  }
  return setError(fcInvalidArgument, "%s=%s: use one of %s", name, v, names.c_str());
}

constexpr std::pair<const char*, AllReduceAlgo> kAllReduceAlgos[] = {
    {"auto", AllReduceAlgo::Auto}, {"oneshot", AllReduceAlgo::OneShot},
    {"twoshot", AllReduceAlgo::TwoShot}, {"twoshot-lamport", AllReduceAlgo::LamportTwoShot},
    {"ce", AllReduceAlgo::CopyEngine}};
constexpr std::pair<const char*, MoveAlgo> kMoveAlgos[] = {
    {"auto", MoveAlgo::Auto}, {"sm", MoveAlgo::Sm}, {"ce", MoveAlgo::CopyEngine}};
// FC_REDUCE_SCATTER_ALGO also takes the Lamport kernel (where a block fits its slot).
constexpr std::pair<const char*, MoveAlgo> kReduceScatterAlgos[] = {
    {"auto", MoveAlgo::Auto}, {"sm", MoveAlgo::Sm}, {"ce", MoveAlgo::CopyEngine}, {"lamport", MoveAlgo::Lamport}};
// FC_AGMM_PASSES: how the pipeline in passes moves a pass's rows (tuning/algos.h).
// FC_AGMM_AGATHERED: where the engine path fills a caller's Agathered (fused/fused.h).
constexpr std::pair<const char*, int> kAgmmAgathered[] = {{"front", 0}, {"beside", 1}, {"stages", 2}};
// FC_AGMM_SYMMETRIC: how the engine path moves a symmetric A's shards (fused/fused.h).
constexpr std::pair<const char*, bool> kAgmmSymmetric[] = {{"pull", false}, {"push", true}};
// FC_AGMM_ENGINE_PUSH: who stores the engine's pushed shards (fused/fused.h).
constexpr std::pair<const char*, bool> kAgmmEnginePush[] = {{"ce", false}, {"sm", true}};
constexpr std::pair<const char*, AgmmPasses> kAgmmPasses[] = {
    {"pull", AgmmPasses::Pull}, {"push", AgmmPasses::Push}, {"push-own-first", AgmmPasses::PushOwnFirst}};
// FC_ARNORM_ALGO: "fused" is the one Lamport kernel.
constexpr std::pair<const char*, NormAlgo> kNormAlgos[] = {
    {"auto", NormAlgo::Auto},
    {"fused", NormAlgo::OneKernel},
    {"twoshot", NormAlgo::TwoShot},
    {"unfused", NormAlgo::Unfused}};
// FC_AGMM_ALGO / FC_MMRS_ALGO: the cuBLASLt pipeline ("fused" is its old spelling, still
// accepted), unfused, or the persistent GEMM engine (src/gemm/engine).
constexpr std::pair<const char*, FusedAlgo> kGemmOpAlgos[] = {
    {"auto", FusedAlgo::Auto}, {"pipeline", FusedAlgo::Pipeline}, {"fused", FusedAlgo::Pipeline},
    {"unfused", FusedAlgo::Unfused}, {"engine", FusedAlgo::Engine}};
// FC_MMAR_ALGO: fcMatmulAllReduce's fused paths, the GEMM then the all-reduce, the
// reduce-scatter on fcMatmulReduceScatter's engine, or the decode engine (tuning/algos.h).
constexpr std::pair<const char*, MatmulAllReduceAlgo> kMatmulAllReduceAlgos[] = {
    {"auto", MatmulAllReduceAlgo::Auto}, {"fused", MatmulAllReduceAlgo::Fused},
    {"unfused", MatmulAllReduceAlgo::Unfused}, {"engine", MatmulAllReduceAlgo::Engine},
    {"decode", MatmulAllReduceAlgo::Decode}};
// FC_GEMV_FORM: the one decode kernel's product on CUDA cores or tensor cores.
constexpr std::pair<const char*, GemvForm> kGemvForms[] = {
    {"auto", GemvForm::Auto}, {"fma", GemvForm::Fma}, {"mma", GemvForm::Mma}};
// FC_GEMV_STAGES: the depth of its lanes' rings of loads in shared memory ("0": loads
// into registers, one batch ahead). FC_GEMV_ROTATE: 1 starts each tile's batches of K at
// its own place along K, 0 every tile at K = 0. FC_GEMV_ROW_COPIES: 1 has the MMA form's
// warps copy B's rows whole, 0 each lane its own packs (tuning::chooseGemvStream).
constexpr std::pair<const char*, int> kAutoOnOff[] = {{"auto", -1}, {"1", 1}, {"0", 0}};
constexpr std::pair<const char*, int> kGemvStages[] = {{"auto", -1}, {"0", 0}, {"2", 2}, {"3", 3},
                                                      {"4", 4},     {"5", 5}, {"6", 6}};
// FC_GEMV_WARPS_PER_TILE: how many of a CTA's 8 warps split K for one tile (the rest take
// other tiles); with FC_GEMV_STAGES it sets the bytes in flight a CTA (measurement knob).
constexpr std::pair<const char*, int> kGemvWarpsPerTile[] = {{"auto", -1}, {"1", 1}, {"2", 2}, {"4", 4}, {"8", 8}};
// FC_GEMV_PREFETCH: how many batches of B each warp brings into L2 before the kernel's
// PDL wait (measurement knob).
constexpr std::pair<const char*, int> kGemvPrefetch[] = {{"auto", -1}, {"0", 0}, {"1", 1}, {"2", 2},
                                                        {"4", 4},     {"8", 8}, {"16", 16}};
// FC_GEMV_NORM: the norm forms' residual + RMSNorm in a second kernel after the one decode
// kernel (kernel: 0) or inside it (inside: 1); auto: tuning::gemvNormInside.
constexpr std::pair<const char*, int> kGemvNorm[] = {{"auto", -1}, {"kernel", 0}, {"inside", 1}};
// FC_MMRS_PARTIALS: fcMatmulReduceScatter's partial products in the input type or fp32.
constexpr std::pair<const char*, bool> kPartials[] = {{"input", false}, {"fp32", true}};
// FC_CHECK_POINTERS: 0 skips the buffer argument checks (comm/pointers.h).
// FC_SHARE_GPU: 1 lets several ranks use one GPU (functional tests only). FC_PDL: 0
// launches without programmatic dependent launch (FC_PDL_START_EDGE: 0 without the edge
// from a captured op's start, comm/ops.cc). FC_ARNORM_WIDE_CTAS, _GATHER_SET,
// _PASS_ALIGN: the all-reduce + RMSNorm kernels' forms (comm.h).
constexpr std::pair<const char*, bool> kOnOff[] = {{"1", true}, {"0", false}};
// FC_ARNORM_ROW_CTAS: the one norm kernel's most CTAs of a row each (comm.h), up to this.
constexpr unsigned kMaxNormRowCtas = 1024;
// FC_NORM_LOCAL_ROWS: the local residual + RMSNorm's rows per CTA (comm.h).
constexpr std::pair<const char*, int> kNormLocalRows[] = {{"0", 0}, {"1", 1}, {"2", 2}, {"4", 4}};
// FC_LAMPORT_STAGES: the Lamport one-shot's stages, for timing them (device_comm.h).
constexpr std::pair<const char*, uint32_t> kLamportStageSets[] = {
    {"full", kLamportFull},
    {"push-only", kLamportFull & ~uint32_t(kLamportSum)},
    {"push-twice", kLamportFull | kLamportPushTwice},
    {"sum-twice", kLamportFull | kLamportSumTwice},
    {"reset-twice", kLamportFull | kLamportResetTwice},
    {"no-reset", kLamportFull & ~uint32_t(kLamportReset)},
    {"no-save", kLamportFull & ~uint32_t(kLamportSave)},
    {"no-call", kLamportFull & ~uint32_t(kLamportCall)},
    {"clear-read", (kLamportFull & ~uint32_t(kLamportReset)) | kLamportClearRead},
    {"reset-late", kLamportFull | kLamportResetLate},
    {"reset-call-warp", kLamportFull | kLamportResetByCallWarp},
    {"full-measured", kLamportFull | kLamportMeasured},
    {"lean", kLamportFull | kLamportLean},
    {"late", kLamportFull | kLamportLateTrigger},
    {"solo", kLamportFull | kLamportSolo},
    {"shared", kLamportFull | kLamportShared},
    {"timeline", kLamportFull | kLamportTimeline},
    {"narrow", kLamportFull | kLamportNarrow},
    {"wide", kLamportFull | kLamportWide}};
// FC_AGMM_ENGINE_STAGES: the all-gather + GEMM engine's stages, for timing them.
constexpr std::pair<const char*, EngineStages> kEngineStageSets[] = {
    {"full", EngineStages::Full}, {"no-wait", EngineStages::NoWait}, {"no-pull", EngineStages::NoPull}};
// FC_MMRS_ENGINE_STAGES: the GEMM + reduce-scatter engine's stages, for timing them.
constexpr std::pair<const char*, MmrsEngineStages> kMmrsEngineStageSets[] = {{"full", MmrsEngineStages::Full},
                                                                             {"no-gate", MmrsEngineStages::NoGate},
                                                                             {"no-pull", MmrsEngineStages::NoPull},
                                                                             {"gemm-only", MmrsEngineStages::GemmOnly},
                                                                             {"epilogue-add", MmrsEngineStages::EpilogueAdd},
                                                                             {"epilogue-local", MmrsEngineStages::EpilogueLocal},
                                                                             {"epilogue-push", MmrsEngineStages::EpiloguePush}};
// FC_MMAR_ENGINE_STAGES: fcMatmulAllReduce's engine path's parts, for timing them.
constexpr std::pair<const char*, MmarEngineStages> kMmarEngineStageSets[] = {
    {"full", MmarEngineStages::Full},         {"local", MmarEngineStages::Local},
    {"no-gather", MmarEngineStages::NoGather}, {"no-wait", MmarEngineStages::NoWait},
    {"no-copy", MmarEngineStages::NoCopy},    {"gemm-only", MmarEngineStages::GemmOnly},
    {"bare", MmarEngineStages::Bare}};
// FC_AGMM_ENGINE_TILES: fcAllGatherMatmul's engine's tile shape (auto: the rule).
constexpr std::pair<const char*, int> kAgmmEngineTiles[] = {
    {"auto", 0}, {"128x256", 256}, {"128x224", 224}, {"128x192", 192}, {"128x160", 160}, {"128x128", 128}, {"128x96", 96}};
// FC_MMAR_ENGINE_TILES: fcMatmulAllReduce's engine's tile shape (auto: the rule).
constexpr std::pair<const char*, int> kMmarEngineTiles[] = {{"auto", 0}, {"128x128", 128}, {"128x256", 256}};
// FC_ARNORM_STAGES: the all-reduce + RMSNorm kernel's stages (device/norm_stages.h).
constexpr std::pair<const char*, uint32_t> kNormStageSets[] = {
    {"full", kNormFull},
    {"no-prefetch", kNormFull & ~uint32_t(kNormPrefetch)},
    {"no-norm", kNormPush | kNormSum | kNormResidual | kNormReset | kNormPrefetch},
    {"allreduce-only", kNormPush | kNormSum | kNormReset},
    {"push-only", kNormPush},
    {"no-reset", kNormFull & ~uint32_t(kNormReset)},
    {"solo", kNormFull | kNormSolo},
    {"timeline", kNormFull | kNormTimeline},
    {"loop-row", kNormFull | kNormLoopRow},
    {"full-measured", kNormFull | kNormMeasured}};

// Measurement-only switches: a stage set that leaves stages out (FC_LAMPORT_STAGES,
// FC_ARNORM_STAGES, FC_AGMM_ENGINE_STAGES, FC_MMRS_ENGINE_STAGES, FC_MMAR_ENGINE_STAGES) computes wrong
// results on purpose, to time what the rest costs. Only the probe variant (built with
// FC_PROBES by meson -Dprobes=true, linked by fc-bench and tools/probes) honours them;
// the shipped library refuses them at init, so that a production process that inherits
// one fails loudly instead of returning wrong sums. The sets that compute right results
// (full; FC_ARNORM_STAGES=no-prefetch, loop-row, full-measured; FC_MMRS_ENGINE_STAGES=epilogue-add) stay allowed.
#ifdef FC_PROBES
constexpr bool kProbeBuild = true;
#else
constexpr bool kProbeBuild = false;
#endif

fcResult_t refuseUnlessProbeBuild(const char* name, bool refused,
                                  const char* why = "leaves stages out and computes wrong results") {
  if (!refused || kProbeBuild) return fcSuccess;
  const char* value = getenv(name);
  return setError(fcInvalidUsage,
                  "%s=%s %s: only the probe build honours it "
                  "(meson setup -Dprobes=true; fc-bench and tools/probes link that variant)",
                  name, value != nullptr ? value : "", why);
}

fcResult_t checkMeasurementOnly(const CommParams& p) {
  FC_CHECK(refuseUnlessProbeBuild("FC_LAMPORT_STAGES", p.lamportStages != kLamportFull));
  // no-prefetch, loop-row and full-measured leave nothing out: right results, the same bits.
  FC_CHECK(refuseUnlessProbeBuild("FC_ARNORM_STAGES",
                                  p.normStages != kNormFull && p.normStages != (kNormFull & ~uint32_t(kNormPrefetch)) &&
                                      p.normStages != (kNormFull | kNormLoopRow) &&
                                      p.normStages != (kNormFull | kNormMeasured)));
  FC_CHECK(refuseUnlessProbeBuild("FC_AGMM_ENGINE_STAGES", p.agmmEngineStages != EngineStages::Full));
  FC_CHECK(refuseUnlessProbeBuild("FC_MMAR_ENGINE_STAGES", p.mmarEngineStages != MmarEngineStages::Full));
  FC_CHECK(refuseUnlessProbeBuild("FC_MMRS_ENGINE_TILES", p.mmrsEngineTileN != 0,
                                  "is for measurements (not in the op's signature: ranks must agree)"));
  // Exact, but slower than beside at every shape measured (own_rows_mainloop.cuh).
  FC_CHECK(refuseUnlessProbeBuild("FC_AGMM_AGATHERED", p.agmmAgatheredStages,
                                  "is slower than beside at every shape measured (for measurements)"));
  FC_CHECK(refuseUnlessProbeBuild("FC_MMRS_ENGINE_STAGES", p.mmrsEngineStages == MmrsEngineStages::EpiloguePush,
                                  "is for measurements (right only where every rank's C is 16-byte aligned)"));
  return refuseUnlessProbeBuild("FC_MMRS_ENGINE_STAGES", p.mmrsEngineStages != MmrsEngineStages::Full &&
                                                             p.mmrsEngineStages != MmrsEngineStages::EpilogueAdd &&
                                                             p.mmrsEngineStages != MmrsEngineStages::EpiloguePush);
}
}  // namespace

fcResult_t commParamsResolve(const fcConfig_t* config, CommParams* p) {
  uint64_t channels = 0;
  FC_CHECK(envU64("FC_TIMEOUT_MS", p->timeoutMs, &p->timeoutMs));
  FC_CHECK(envU64("FC_WORKSPACE_BYTES", p->workspaceBytes, &p->workspaceBytes));
  FC_CHECK(envU64("FC_CHANNELS", uint64_t(p->channels), &channels));
  p->channels = channels > 64 ? 65 : int(channels);
  FC_CHECK(envU64("FC_SCRATCH_BYTES", p->scratchBytes, &p->scratchBytes));
  FC_CHECK(envU64("FC_LAMPORT_MAX_BYTES", 0, &p->lamportMaxBytes));
  uint64_t pieces = uint64_t(p->agmmEnginePieces);
  FC_CHECK(envU64("FC_AGMM_ENGINE_PIECES", pieces, &pieces));
  if (pieces < 1 || pieces > 64)
    return setError(fcInvalidArgument, "FC_AGMM_ENGINE_PIECES=%llu: 1 to 64 expected", (unsigned long long)pieces);
  p->agmmEnginePieces = int(pieces);
  uint64_t kPieces = uint64_t(p->agmmEngineKPieces);
  FC_CHECK(envU64("FC_AGMM_ENGINE_KPIECES", kPieces, &kPieces));
  if (kPieces < 1 || kPieces > 16)
    return setError(fcInvalidArgument, "FC_AGMM_ENGINE_KPIECES=%llu: 1 to 16 expected", (unsigned long long)kPieces);
  p->agmmEngineKPieces = int(kPieces);
  uint64_t mmrsPieces = uint64_t(p->mmrsEnginePieces);
  FC_CHECK(envU64("FC_MMRS_ENGINE_PIECES", mmrsPieces, &mmrsPieces));
  if (mmrsPieces > uint64_t(kMaxPieces))
    return setError(fcInvalidArgument, "FC_MMRS_ENGINE_PIECES=%llu: 0 (the rule) or 1 to %d expected",
                    (unsigned long long)mmrsPieces, kMaxPieces);
  p->mmrsEnginePieces = int(mmrsPieces);
  // FC_MMRS_ENGINE_LEAD unset keeps -1, the tuning rule.
  constexpr uint64_t kUnset = UINT64_MAX;
  uint64_t lead = kUnset;
  FC_CHECK(envU64("FC_MMRS_ENGINE_LEAD", kUnset, &lead));
  if (lead != kUnset && lead > uint64_t(kMaxPieces))
    return setError(fcInvalidArgument, "FC_MMRS_ENGINE_LEAD=%llu: 0 to %d expected", (unsigned long long)lead,
                    kMaxPieces);
  if (lead != kUnset) p->mmrsEngineLead = int(lead);
  uint64_t clusterPacks = p->normClusterPacks;
  FC_CHECK(envU64("FC_ARNORM_CLUSTER_PACKS", clusterPacks, &clusterPacks));
  // (2^32 - 1 and more mean the default.)
  p->normClusterPacks = clusterPacks >= kNormClusterPacksAuto ? kNormClusterPacksAuto : uint32_t(clusterPacks);
  FC_CHECK(choiceFromEnv("FC_ARNORM_WIDE_CTAS", kOnOff, &p->normWideCtas));
  uint64_t rowCtas = p->normRowCtas;
  FC_CHECK(envU64("FC_ARNORM_ROW_CTAS", rowCtas, &rowCtas));
  if (rowCtas > kMaxNormRowCtas)
    return setError(fcInvalidArgument, "FC_ARNORM_ROW_CTAS=%llu: 0 (the rule) or 1 to %u expected",
                    (unsigned long long)rowCtas, kMaxNormRowCtas);
  p->normRowCtas = uint32_t(rowCtas);
  FC_CHECK(choiceFromEnv("FC_ARNORM_GATHER_SET", kOnOff, &p->normGatherSet));
  FC_CHECK(choiceFromEnv("FC_ARNORM_PASS_ALIGN", kOnOff, &p->normPassAlign));
  FC_CHECK(choiceFromEnv("FC_NORM_LOCAL_ROWS", kNormLocalRows, &p->normLocalRows));
  uint64_t spins = kUnset;
  FC_CHECK(envU64("FC_LAMPORT_SPINS", kUnset, &spins));
  if (spins != kUnset) {
    p->lamportSpins = spins > 0xffffffffu ? 0xffffffffu : uint32_t(spins);
    p->lamportSpinsSet = true;
  }
  uint64_t engineSms = uint64_t(p->engineSms);
  FC_CHECK(envU64("FC_ENGINE_SMS", engineSms, &engineSms));
  // At least one 2-CTA cluster beside the two SMs the GEMM + reduce-scatter engine
  // leaves to its gates.
  if ((engineSms > 0 && engineSms < 4) || engineSms > 4096)
    return setError(fcInvalidArgument, "FC_ENGINE_SMS=%llu: 0 (all) or 4 to 4096 expected",
                    (unsigned long long)engineSms);
  p->engineSms = int(engineSms);
  uint64_t maxCtas = uint64_t(p->maxCtas);
  FC_CHECK(envU64("FC_MAX_CTAS", maxCtas, &maxCtas));
  p->maxCtas = maxCtas > uint64_t(kMaxBlocks) ? kMaxBlocks + 1 : int(maxCtas);  // > kMaxBlocks: refused below
  // Checked against the world size's slot at init (commInit).
  if (p->lamportMaxBytes > kLamportSlotBytesMax)
    return setError(fcInvalidArgument, "FC_LAMPORT_MAX_BYTES=%llu exceeds the largest push slot (%zu bytes)",
                    (unsigned long long)p->lamportMaxBytes, kLamportSlotBytesMax);
  FC_CHECK(choiceFromEnv("FC_ALLREDUCE_ALGO", kAllReduceAlgos, &p->allReduceAlgo));
  FC_CHECK(choiceFromEnv("FC_REDUCE_SCATTER_ALGO", kReduceScatterAlgos, &p->reduceScatterAlgo));
  FC_CHECK(choiceFromEnv("FC_ALLGATHER_ALGO", kMoveAlgos, &p->allGatherAlgo));
  FC_CHECK(choiceFromEnv("FC_AGMM_ALGO", kGemmOpAlgos, &p->allGatherMatmulAlgo));
  FC_CHECK(choiceFromEnv("FC_MMRS_ALGO", kGemmOpAlgos, &p->matmulReduceScatterAlgo));
  FC_CHECK(choiceFromEnv("FC_ARNORM_ALGO", kNormAlgos, &p->allReduceNormAlgo));
  FC_CHECK(choiceFromEnv("FC_MMAR_ALGO", kMatmulAllReduceAlgos, &p->matmulAllReduceAlgo));
  FC_CHECK(choiceFromEnv("FC_GEMV_FORM", kGemvForms, &p->gemvForm));
  FC_CHECK(choiceFromEnv("FC_GEMV_STAGES", kGemvStages, &p->gemvStages));
  FC_CHECK(choiceFromEnv("FC_GEMV_ROTATE", kAutoOnOff, &p->gemvRotate));
  FC_CHECK(choiceFromEnv("FC_GEMV_ROW_COPIES", kAutoOnOff, &p->gemvRowCopies));
  FC_CHECK(choiceFromEnv("FC_GEMV_WARPS_PER_TILE", kGemvWarpsPerTile, &p->gemvWarpsPerTile));
  FC_CHECK(choiceFromEnv("FC_GEMV_PREFETCH", kGemvPrefetch, &p->gemvPrefetch));
  FC_CHECK(choiceFromEnv("FC_GEMV_NORM", kGemvNorm, &p->gemvNorm));
  FC_CHECK(choiceFromEnv("FC_CHECK_POINTERS", kOnOff, &p->checkPointers));
  FC_CHECK(choiceFromEnv("FC_MMRS_PARTIALS", kPartials, &p->mmrsFp32Partials));
  FC_CHECK(choiceFromEnv("FC_SHARE_GPU", kOnOff, &p->shareGpu));
  FC_CHECK(choiceFromEnv("FC_PDL", kOnOff, &p->pdl));
  FC_CHECK(choiceFromEnv("FC_PDL_START_EDGE", kOnOff, &p->pdlStartEdge));
  FC_CHECK(choiceFromEnv("FC_DECODE_GEMM", kOnOff, &p->decodeGemm));
  FC_CHECK(choiceFromEnv("FC_LAMPORT_STAGES", kLamportStageSets, &p->lamportStages));
  FC_CHECK(choiceFromEnv("FC_ARNORM_STAGES", kNormStageSets, &p->normStages));
  FC_CHECK(choiceFromEnv("FC_AGMM_ENGINE_STAGES", kEngineStageSets, &p->agmmEngineStages));
  FC_CHECK(choiceFromEnv("FC_AGMM_PASSES", kAgmmPasses, &p->agmmPasses));
  int agathered = p->agmmAgatheredStages ? 2 : p->agmmAgatheredBeside ? 1 : 0;
  FC_CHECK(choiceFromEnv("FC_AGMM_AGATHERED", kAgmmAgathered, &agathered));
  p->agmmAgatheredBeside = agathered >= 1;  // stages: the beside form, the GEMM filling it
  p->agmmAgatheredStages = agathered == 2;
  FC_CHECK(choiceFromEnv("FC_AGMM_ENGINE_PUSH", kAgmmEnginePush, &p->agmmEnginePushBySm));
  FC_CHECK(choiceFromEnv("FC_AGMM_SYMMETRIC", kAgmmSymmetric, &p->agmmSymmetricPush));
  FC_CHECK(choiceFromEnv("FC_MMRS_ENGINE_STAGES", kMmrsEngineStageSets, &p->mmrsEngineStages));
  FC_CHECK(choiceFromEnv("FC_MMAR_ENGINE_STAGES", kMmarEngineStageSets, &p->mmarEngineStages));
  FC_CHECK(choiceFromEnv("FC_MMAR_ENGINE_TILES", kMmarEngineTiles, &p->mmarEngineTileN));
  FC_CHECK(choiceFromEnv("FC_MMRS_ENGINE_TILES", kMmarEngineTiles, &p->mmrsEngineTileN));
  FC_CHECK(choiceFromEnv("FC_AGMM_ENGINE_TILES", kAgmmEngineTiles, &p->agmmEngineTileN));
  FC_CHECK(checkMeasurementOnly(*p));
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
    if (config->size >= offsetof(fcConfig_t, scratchBytes) + sizeof(long long) &&
        config->scratchBytes != FC_CONFIG_UNSET) {
      if (config->scratchBytes < 0)
        return setError(fcInvalidArgument, "config.scratchBytes must be >= 0, not %lld", config->scratchBytes);
      p->scratchBytes = uint64_t(config->scratchBytes);
    }
    if (config->size >= offsetof(fcConfig_t, fp32Partials) + sizeof(int) && config->fp32Partials != FC_CONFIG_UNSET) {
      if (config->fp32Partials != 0 && config->fp32Partials != 1)
        return setError(fcInvalidArgument, "config.fp32Partials must be 0 or 1, not %d", config->fp32Partials);
      p->mmrsFp32Partials = config->fp32Partials == 1;
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
  // Up to 8 channels were meaningful before 0.2 (one per stream). Now a channel
  // carries a sequence of ops (comm/ops.cc), the eager one or the captured one, so
  // values above kMaxChannels are accepted and give kMaxChannels.
  constexpr int kMaxConfigChannels = 8;
  if (p->channels < 1 || p->channels > kMaxConfigChannels)
    return setError(fcInvalidArgument, "channels (FC_CHANNELS) %d is not in [1, %d]", p->channels,
                    kMaxConfigChannels);
  if (p->channels > kMaxChannels) p->channels = kMaxChannels;
  if (p->scratchBytes > (1ull << 40))
    return setError(fcInvalidArgument, "scratch of %llu bytes is over 1 TiB", (unsigned long long)p->scratchBytes);
  return fcSuccess;
}

}  // namespace fc
