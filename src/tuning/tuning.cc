// The tuning table: every threshold behind an automatic choice, one row each with its
// value, a one-line reason and where it was measured ("perf-log: X" is the section
// "X" under "Tuning table" in docs/perf-log.md, which holds the figures; results/...
// is a folder of docs/results). Below the table, the choice functions of tuning.h,
// which read nothing else. Rows that are the same value by design say so and point at
// each other instead of repeating it. docs/design.md, "Tuning".
#include "tuning/tuning.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "device/device_comm.h"  // the Lamport push slots' sizes (a memory layout, not a choice)

namespace fc::tuning {
namespace {

constexpr size_t KiB = size_t(1) << 10, MiB = size_t(1) << 20;

// ======================================================================================
// The table
// ======================================================================================

// ---- fcAllReduce ----------------------------------------------------------------------
// One-shot limit at 2 ranks: its whole push slot (4 MiB): it sends the two-shot's bytes
// with one round trip instead of two.                      perf-log: oneShotMaxBytes
constexpr size_t kOneShotMax2Ranks = kLamportSlotBytesMax;
// One-shot limit at 3-4 ranks: the Lamport two-shot is ahead above 512 KiB. On 4 H200s,
// three runs (fc-bench stages' crossover): the one-shot 0.7-2.9 us ahead at 320-500 KB,
// behind from 625 KB (8.82 against 8.53 us at 7fd8112).   perf-log: oneShotMaxBytes
constexpr size_t kOneShotMax4Ranks = 512 * KiB;
// One-shot limit beyond 4 ranks (unmeasured; no Lamport two-shot there): W-1 remote
// reads against the SM two-shot's two barriers.             perf-log: oneShotMaxBytes
constexpr size_t kOneShotMaxWide = 512 * KiB;
// Lamport protocol up to the push slot at <= 4 ranks: the fastest one-shot there.
//                                                          perf-log: lamportMaxBytes
constexpr int kLamportOneShotMaxRanks = 4;
// ... and up to 256 KiB beyond 4 ranks ((W-1) pushed copies per rank; unmeasured).
//                                                          perf-log: lamportMaxBytes
constexpr size_t kLamportOneShotMaxWide = 256 * KiB;
// The Lamport one-shot's CTAs one to an SM where a data thread owns 2 packs or more (at
// 2 ranks, 128 CTAs x 512 data threads: above 1 MiB). 2 H200s, fc-bench stages, same run,
// `solo-early` (this placement, the trigger after the pushes: what calls now run)
// against CTAs beside the next call's: 2 MiB 9.54-9.59 against 9.95-9.97 us, 2.4 / 2.8 /
// 3.4 MiB 11.03 / 12.23 / 14.15 against 11.26-11.50 / 12.99-13.04 / 15.21-15.28, 4 MiB
// 16.00-16.14 against 17.09-17.71; at 1 pack a thread 0.0-0.15 slower (1 MiB 6.36 against
// 6.21-6.25). The PDL trigger at the CTAs' end (the rule of 90c8ad3 - 6e422d1, aimed at
// the same placement) gained less: 4 MiB 17.03-17.09.
//                                                          perf-log: lamportSoloCtas
constexpr size_t kLamportSoloPacks = 2;
// The Lamport one-shot's CTAs of up to 1024 threads (992 data threads and the call warp)
// where a CTA owns more packs than the 512 data threads of the others and no more than
// 992 (normWideCtas's rule, for the one-shot's CTAs; 5-7 chunks of 128 packs: at 2 ranks
// 1-1.75 MiB), each data thread then one pack, where 512 leave some of them two (and the
// CTAs one to an SM). 2 H200s (fc-bench stages,
// 9b8f54f, two runs within 0.02 us): 1.03-1.70 MiB 5.80-7.76 against 6.30-8.25 us (0.92x
// at 1.03 MiB, 0.94x at 1.70), also 0.10-0.21 us under the push-rate probe's fastest minimal
// Lamport one-shot at 1.27-1.70 MiB; at 8 chunks a CTA (1.75-2 MiB) the form falls back
// to 512 (1024 data threads and the call warp exceed a CTA). Beyond 2 ranks the one-shot
// stops at its 1 MiB slot (at most 512 packs a CTA): never there.
//                                                          perf-log: lamportWideCtas
// The Lamport two-shot above the one-shot at <= 4 ranks: ahead of every other
// algorithm and of NCCL at every size to 256 MiB.           perf-log: lamportTwoShotAuto
constexpr int kLamportTwoShotMaxRanks = 4;
// The copy-engine all-reduce from 64 MiB (where no Lamport two-shot runs): below it the
// SM two-shot wins (no per-transfer start-up).              perf-log: ceMinBytes
constexpr size_t kCeAllReduceMin = 64 * MiB;

// ---- fcReduceScatter, fcAllGather ------------------------------------------------------
// The Lamport reduce-scatter wherever a block fits its push slot, at <= 4 ranks: one
// round trip against the SM kernel's staging and two barriers. perf-log: chooseReduceScatter
constexpr int kLamportReduceScatterMaxRanks = 4;
// Copy-engine reduce-scatter from 32 MiB of input.          perf-log: ceMinBytes
constexpr size_t kCeReduceScatterMin = 32 * MiB;
// Copy-engine all-gather from 64 MiB of output.             perf-log: ceMinBytes
constexpr size_t kCeAllGatherMin = 64 * MiB;

// ---- fcAllReduceResidualRMSNorm ---------------------------------------------------------
// At 2 ranks one kernel for up to 384 rows (3 rows for each of the grid's 128 CTAs), up to
// its push slot (4 MiB), the two-shot kernel beyond: the one kernel runs a CTA (or
// cluster) per row, each pushing its whole row, one exchange; the two-shot a CTA per row
// of a rank's block (half the rows), two exchanges. So the one kernel's CTAs have about
// one row more each at 129-384 rows (2-3 against 1-2), the two-shot's two from 385 (4
// against 2). 2 H200s (fc-bench arnorm, 2026-11-28, 2ecbd4f, two runs within 1 %): at
// 257-384 rows the one kernel took 0.83-0.93x the two-shot's time at hidden 2048-7168
// (288 x 2560 10.36 against 12.44 us); at 161-256 0.89-1.04x (192 x 5120 11.65 / 13.08;
// 255 x 7168 17.33 / 16.71, 255 x 2048 7.84 / 7.59); at 512 rows of 3584-4096 1.06-1.08x.
// (Until then 160 rows, from 2 H100s on 2026-11-26, before the kernel's slot addresses
// in registers and wide CTAs: 200 x 2048 7.2 against 8.3.)
//                                                          perf-log: allReduceNormOneKernelMaxBytes
constexpr size_t kNormOneKernelMaxRows = 384;
// ... and up to 640 rows of at most 4 KiB (hidden 2048 in bf16): there the one kernel's
// CTAs hold a row at one pack a data thread (256 of them) and 4-5 rows cost less than the
// two-shot's second exchange. 2 H200s (2026-11-28, 42a5281, fc-bench arnorm, 385-640 rows): x 2048
// the one kernel took 0.87-0.98x the two-shot's time at every count (385 10.40 against
// 12.02 us, 512 12.46 / 12.69, 640 15.40 / 16.01); x 2560 0.89-1.03x (ahead to 448 rows,
// behind at 480-512), x 3072-5120 ahead only at 385 and 1.00-1.07x behind from 416.
//                                                          perf-log: allReduceNormOneKernelMaxBytes
constexpr size_t kNormOneKernelShortRowsMaxRows = 640;
constexpr size_t kNormOneKernelShortRowBytes = 4 * KiB;
// Beyond 2 ranks the one kernel only above 256 KiB and up to 576 KiB: at 4 ranks the
// all-reduce's one-shot + the norm kernel were 0.8-1.2 us ahead of it at 1-64 tokens of
// every hidden size (its CTA per row pushes W-1 copies of the row, the one-shot spreads
// them over its grid); the one kernel was ahead of the two-shot all-reduce + norm from
// 256 to 557 KiB, behind from 655 KiB, and ahead of the one-shot all-reduce + norm there
// too (100 x 2048: 7.9 us against ~8.4 = the one-shot's 6.5 + the norm's ~1.9; 4 H200s,
// 7fd8112). 8 ranks (unmeasured) follow the same rule.   perf-log: allReduceNormOneKernelMaxBytes
constexpr int kNormOneKernelFromZeroMaxRanks = 2;
constexpr size_t kNormOneKernelAboveWide = 256 * KiB;
constexpr size_t kNormOneKernelMaxWide = 576 * KiB;
// ... and at 3-4 ranks from the first byte where a row fills half a cluster of the one
// kernel or more (4 of its 8 CTAs of 256 packs: 16 KiB, hidden 8192 in bf16): there the
// norm kernel's CTA per row leaves its threads 2-4 packs each, where the cluster spreads
// the row over 4-8 SMs. The one kernel / the unfused path at 1 / 3 / 8 rows of 16384 in
// bf16: 0.88 / 0.89 / 0.86 on 4 H100s (71661d5), 0.88 / 0.87 / 0.86, 0.89 / 0.90 / 0.89
// and 0.86 / 0.87 / 0.87 on 4 H200s (90c8ad3, 2ecbd4f, 42a5281; 1 x 16384 5.97 against
// 6.91 us); of 12288 0.90 / 0.92 / 0.92 and of 8192 0.96 / 0.95 / 0.97 (42a5281); rows of
// 8-10 KiB (4096-5120) 0.96-1.05.                          perf-log: allReduceNormOneKernelMaxBytes
constexpr int kNormOneKernelLongRowsMaxRanks = 4;
constexpr size_t kNormOneKernelLongRowBytes = 16 * KiB;
// The two-shot kernel only at 2 ranks: at 4 a pass is half a 1 MiB push slot, so its grid
// (a CTA per row of a rank's block) is 16-64 CTAs at hidden 4096-16384; the unfused path
// was 1.1-2.7x ahead at every size above 1 MiB.           perf-log: allReduceNormOneKernelMaxBytes
constexpr int kNormTwoShotMaxRanks = 2;
// ... and not past 1024 rows of at most 5 KiB (hidden 2048-2560 in bf16): there the
// all-reduce, then the local norm in groups of 4 rows a CTA, is ahead (2 H200s,
// thirty-third session: 1500 / 2048 / 8192 x 2048 0.90 / 0.80 / 0.86x the two-shot
// kernel, x 2560 0.92 / 0.91 / 0.96x; level or behind at 1024 rows and below; rows of 6
// KiB mixed (0.98-1.07x), of 7 KiB and more behind).      perf-log: residualNormRowsPerCta
constexpr size_t kNormTwoShotShortRowBytes = 5 * KiB;
constexpr size_t kNormTwoShotShortRowsMinRows = 1025;
// The two-shot kernel's rows over clusters of CTAs where a pass's blocks have too few
// rows to fill the grid (long rows in small slots): the width doubles while a block's
// clusters still fit maxCtas CTAs and each CTA keeps at least 128 packs, up to the
// portable cluster size. 4 H100s: 2048 x 16384 at 2 ranks 232 us (2 CTAs a row) against
// 274 (one), at 4 ranks 592 (8) against 1110 (one).        perf-log: normTwoShotClusterCtas
constexpr unsigned kNormTwoShotMaxClusterCtas = 8;
constexpr size_t kNormTwoShotMinClusterPacks = 128;
// FC_ARNORM_CLUSTER_PACKS' default beyond one CTA's row: clusters of 256 packs per CTA
// (ahead of 128 and of one CTA at hidden 8192).             perf-log: normClusterPacks
constexpr uint32_t kNormClusterPacks = 256;
// ... but one CTA a row with one data thread per pack (a wide CTA, normWideCtas) up to 640
// packs (hidden 5120 in bf16): 2 H200s (forty-ninth session, fc-bench arnorm, the layouts in
// turn, 1-64 rows) 4.09 / 4.38 / 4.95 / 6.26 us at 1 / 4 / 16 / 64 rows against 4.42 / 4.76 /
// 5.12 / 6.46 with clusters of 3 x 256 packs; at 768 and 896 packs (6144, 7168) the wide CTA
// took 0.1-0.7 us more than the clusters, at 1024 and beyond (two packs a thread) more still.
//                                                          perf-log: normClusterPacks
constexpr size_t kNormOneWideCtaMaxPacks = 640;
// The one kernel's polls back to back for their first 64 rounds (no __nanosleep) up to 128
// rows, where FC_LAMPORT_SPINS is not given (every other Lamport kernel follows it, default
// 0: a back-off after the first miss). 2 H200s (fiftieth session, fc-bench normstages at
// ef1ea26, hidden 2048 / 3072 / 4096 / 5120 / 8192 / 16384 x 1 / 4 / 16 / 64 / 128 rows):
// 0.11-0.41 us faster in every cell (1 x 4096 3.65 -> 3.48, 128 x 8192 11.39 -> 10.98, 64 x
// 16384 11.96 -> 11.59), 1024 spins the same; the push-rate probe's minimal kernel of the
// same rows pays 0.1-0.45 us for the back-off at 1-32 rows. Beyond 128 rows unmeasured:
// the back-off stays there (tens of thousands of threads polling at full rate compete
// with the incoming stores for L2 at the one-shot's 4 MiB).  perf-log: normLamportSpins
constexpr uint32_t kNormSpins = 64;
constexpr size_t kNormSpinsMaxRows = 128;
// Where the clusters halved to CTAs of more than 512 packs, CTAs of one data thread per
// pack, but only where every data thread gets one: 2 H200s, 100 x 5120 8.35 against 9.59 us,
// 128 x 6144 10.14 against 11.40, 64 x 12288 10.99 against 12.02; but at 8192 (1024 packs
// over 992 threads) 12.28 against 11.58, so a share that would still leave some threads
// two packs keeps 512 threads.                                    perf-log: normWideCtas

// Past 128 rows (maxCtas) at 2 ranks, a CTA a row on the kernel built for two CTAs an SM
// (56 registers), where rows of up to 512 packs (hidden 4096 in bf16) all fit resident (528
// CTAs at hidden 2048, 396 at 2560, 264 at 3072-4096), instead of 128 CTAs with rows in
// turn. 2 H200s (fifty-first session, fc-bench normstages, the one kernel forced, us): 129 x
// 2048 5.38 against 6.21, 512 x 2048 10.31 / 12.45, 384 x 2560 9.97 / 11.42, 256 x 4096 10.48
// / 11.32 (0.82-0.93x at the 17 cells of 129-512 x 2048-4096 it takes); where not all rows
// fit, 320-384 x 4096 14.20-16.06 against 13.98-15.16 (behind), so those keep 128; at 16-128
// rows the same grid on 56 registers took 1.00-1.04x; 192-256 x 8192 (two packs a thread)
// 1.03x from PyTorch.                                          perf-log: normRowsOwnCtas
constexpr int kNormRowsOwnCtasRanks = 2;

// The local residual + RMSNorm (the unfused path's second kernel, fcMatmulAllReduce's norm
// forms after the engine) in groups of rows per CTA from 3 MiB of rows: a thread's loads of
// the group's rows in flight together, at most 4 packs of each kind a thread (4 rows of
// <= 512 packs, 2 of <= 1024; longer rows: one per CTA). 2 H200s (thirty-third session),
// the norm's own time: 8192 x 4096 114.5 -> 69.0 us (3.9 TB/s), 16384 x 5120 315 -> 171,
// 1024 x 4096 14.7 -> 8.0; at 3 MiB 4.9 -> 5.1 (768 x 2048) and 5.4 -> 4.6 (384 x 4096);
// below it behind (256 x 4096 3.8 -> 6.1).                perf-log: residualNormRowsPerCta
constexpr size_t kNormLocalRowsMinBytes = 3 * MiB;
constexpr size_t kNormLocalRowsMaxPacks = 4;
// The norm behind fcMatmulAllReduce's decode kernel with its row in registers past 512
// packs (one H200, world size 1, the weight cold, sixty-fourth session): one pack a thread
// at 513-1023 packs 0.01-0.48 us faster than the 512-thread kernel's row loop (hidden
// 5120-7168); two at 1024-2048 0.03-0.57 faster (8192-16384); one a thread at 1024 was
// level or up to 0.2 slower. Up to 512 packs the 512-thread kernel holds the row in
// registers already (its 32-register build lost 0.44 us at 8 x 4096).
//                                                          perf-log: residualNormRegPacks
constexpr size_t kNormRegMinPacks = 513;

// ---- fcAllGatherMatmul --------------------------------------------------------------------
// The engine by default at 2-4 ranks (8 unmeasured). At 3-4 ranks only for shards of
// 1024 rows (its least, below) or where the pipeline does not fill its waves: on 4 H200s it was
// ahead there (4096 x 7168 x 4096 309.5 against the pipeline's 334.1 us; 8192 x 1536 x
// 4096 209.8 against the unfused path's 302.7), 2-8 % behind the pipeline with larger
// shards (8192 x 7168 x 4096, symmetric A: 629.8 against 605.4).
//                                                          perf-log: chooseAllGatherMatmul
constexpr int kAgmmEngineMaxRanks = 4;
constexpr size_t kAgmmEngineWideMaxShardRows = 1024;
// ... with shards of at least 1024 rows (8 tile rows): below, its fixed costs exceed what
// the overlap hides.                                       perf-log: chooseAllGatherMatmul
constexpr size_t kAgmmEngineMinShardRows = 1024;
// ... N and K at most 8192: beyond, the pipeline's cuBLASLt GEMMs beat its kernel on 128-
// and 256-wide tiles. At 2 ranks also N beyond 8192 where B [N, K] is within 128 MiB (where
// the cooperative widths run: 128 x 224 and 128 x 160 since the forty-eighth session): 2
// H200s, fc-bench agmm, two runs, the engine forced against auto (us): 3072 x 14336 x 4096
// 455-469 against the pipeline's 479-492, 2048 / 4096 x 14336 and 2048 x 10240 level or 1.5 %
// ahead, 1024 x 14336 x 4096 154.5 against the pipeline's 173-175 (its 512-row shards take the
// model's rule below), 1024 x 10240 / 12288 level / 2 % ahead; with B beyond 128 MiB
// (ping-pong tiles only) 10 % behind (2048 x 28672 x 4096 673-675 against 613-615). Measured
// to shards of 2048 rows; with larger ones the pipeline takes 1.02-1.03x the GEMM alone
// (8192 x 14336 x 4096), the engine's GEMM there 1.03x cuBLASLt's: it keeps them.
//                                                          perf-log: chooseAllGatherMatmul
constexpr size_t kAgmmEngineMaxNK = 8192;
constexpr size_t kAgmmEngineWideNMaxShardRows = 2048;
// ... and at least one wave of 128 x 256 tiles on the engine's SMs.
//                                                          perf-log: chooseAllGatherMatmul
constexpr size_t kAgmmEngineMinWaves = 1;
// The pipeline needs shards of at least 512 rows: smaller per-shard GEMMs are bound by
// reading all of B, W times.                               perf-log: chooseAllGatherMatmul
constexpr size_t kAgmmPipelineMinShardRows = 512;
// ... and each shard's GEMM filling two waves of 128 x 128 tiles on the GPU's SMs.
//                                                          perf-log: chooseAllGatherMatmul
constexpr size_t kAgmmPipelineMinWavesX4 = 8;  // in quarter waves: 2 waves
// The unfused path's Lamport all-gather (into the scratch) for shards up to 1 MiB at
// 2-4 ranks: the same protocol's reduce-scatter was ahead to 1 MiB blocks, behind at 4.
//                                                          perf-log: allGatherMatmulGather
constexpr size_t kAgmmLamportGatherMax = 1 * MiB;
constexpr int kAgmmLamportGatherMaxRanks = 4;
// At 2 ranks also shards of 512-1023 rows (where the rules above give the unfused path)
// where the engine's model (allGatherEngineSeconds) takes at most 0.95x the unfused path's:
// on a width whose tiles leave local work for the SMs while the peer's shard is pulled. 2
// H200s, forty-second session, fc-bench agmmstages, us, engine / unfused: 1024 x 3072 x
// 4096 47.7 / 56.7 (128 x 96 in 1.9 waves; one wave of 128 x 192 took 60.3: every peer tile
// waits for the whole pull), 1024 x 4096 x 7168 83.3 / 107.8, 1024 x 8192 x 8192 179.2 /
// 214.6, 1536 x 4096 x 4096 72.6 / 94.3; 6 more shapes likewise, 1024 x 2048 x 4096 left
// unfused (45.4; the engine's best 44.5).                  perf-log: agmmEngineModel
// Beyond N 8192 (where the engine runs at all: above) the pipeline fills its waves with
// 512-row shards, and took about the unfused path's modelled time there (1024 x 14336 x 4096:
// 173-175 us, the model's unfused 175, its engine 159, the engine 154.5), so the model's
// rule comes before the pipeline's there.                   perf-log: chooseAllGatherMatmul
// The pushed form only (AllGatherMatmulQuery::enginePushes), the one those timings ran:
// the pulled form (a symmetric A with Agathered) took 57.8 us at 1024 x 3072 x 4096 where
// the unfused path, gathering into Agathered from the symmetric A directly, took 53.8
// (forty-second session, fc-bench agmm --msweep).           perf-log: agmmEngineModel
// Shards of whole clusters (2 x 1 of 128-row tiles) only: a cluster across two shards
// shares its B tiles (multicast), so its local tile likely waits with the peer's, which
// the model leaves out (1280 x 3072 x 4096, shards of 2.5 clusters: the engine 75.7 us on
// the model's 128 columns, 66.5-73.7 on the others, the unfused path 69.8).
constexpr size_t kAgmmEngineModelMinShardRows = 512;
constexpr double kAgmmEngineModelMargin = 0.95;
// Shards of one cluster row (256 rows) beyond N 8192 at 2 ranks, where the model cannot
// tell (its unfused GEMM is our width rule's; the unfused path runs cuBLASLt's): the engine
// where its width's tiles fill at least 95 % of their last wave. 2 H200s, fc-bench agmm,
// the engine forced against auto (unfused), two runs, us, 512 x N x 4096: N 10240 68.3 /
// 69.6, 12288 75.9 / 79.6, 14336 89.4 / 98.4, 15360 97.9 / 98.6, 16384 98.0 / 98.8 and
// x 5120 at 10240 / 12288 81.6 / 83.5, 91.3 / 96.8 (every tile count 97 % of its waves);
// 9216 66.7 / 63.2, 11264 74.7 / 72.9, 13312 88.2 / 88.7 (88-91 %).
//                                                          perf-log: chooseAllGatherMatmul
constexpr double kAgmmEngineOneClusterMinWaveFill = 0.95;
// The model: one SM runs a 128 x 128 tile's mainloop at 6 TFLOP/s (bf16; 22.4 us at K
// 4096, from the GEMM alone over 1-3 waves), a W-wide tile W / 128 times as long times the
// width's cost (kTileWidths); the engine adds 7 us (its barrier, flags, launch), the
// unfused path 3 us to the all-gather and the GEMM. Fitted to 17 engine timings (6 shapes,
// 2-3 widths each, 512-2048 rows) within 4.5 us.            perf-log: agmmEngineModel
constexpr double kEngineSmFlopsPerSecond = 6.0e12;
constexpr double kAgmmEngineFixedSeconds = 7e-6, kAgmmUnfusedFixedSeconds = 3e-6;
// The pipeline's cost model (4 x H200): a copy-engine pull at 350 GB/s + 8 us per
// transfer, a bf16 GEMM at 600 TFLOP/s + 5 us.             perf-log: pipelineCostModel
constexpr double kPullBytesPerSecond = 350e9, kPullFixedSeconds = 8e-6;
constexpr double kGemmFlopsPerSecond = 600e12, kGemmFixedSeconds = 5e-6;

// ---- fcMatmulReduceScatter -----------------------------------------------------------------
// The engine by default only at 2 ranks, with its epilogue add.  perf-log: chooseMatmulReduceScatter
constexpr int kMmrsEngineRanks = 2;
// ... blocks of at least 1024 rows (at 512 the scatter path is ahead).
//                                                          perf-log: chooseMatmulReduceScatter
constexpr size_t kMmrsEngineMinBlockRows = 1024;
// ... and K at most 2048, or beyond it where the product fills 3.75 waves of 128 x 128
// tiles: on those tiles (the epilogue add's since the forty-fourth session; 128 x 256
// before, where cuBLASLt's GEMM alone was faster than the kernel) the engine took 0.88-0.99x
// the pipeline's time at 2048-8192 x 5120 x 2560, 8192 x 4096 x 7168 and 2048 / 8192 x 5120
// x 13824, level at 2048 x 4096 x 7168 (2 H200s, two runs; the least filled 3.9 waves: 2048
// x 4096).                                                 perf-log: chooseMatmulReduceScatter
constexpr size_t kMmrsEngineMaxK = 2048;
constexpr size_t kMmrsEngineLongKMinWavesX4 = 15;  // in quarter waves: 3.75 waves
// ... but for fcMatmulAllReduce (the sums gathered in the same epilogue, no all-gather
// after) at every K, both forms, since its engine runs on 128 x 128 ping-pong tiles
// (scatterEngineSmallTiles): 2 H200s, thirty-fourth session, engine forced against GEMM +
// fcAllReduce (+ norm) in the same run, 0.65-0.97x at all 24 cells of 2048-8192 x 4096 x
// 2048 / 7168, 5120 x 2560 / 13824 (2048 x 4096 x 7168 0.95x plain, 0.97x norm, where
// the 128 x 256 tiles had been 1.07 / 1.10x behind; before, to K 2560 and beyond it from
// 2048 x 5120 elements (plain) or 8192 x 4096 (norm forms)).
//                                                          perf-log: chooseMatmulAllReduce
// ... where the product fills at least 2 waves of 128 x 128 tiles beyond K 2048: the least
// measured there was 3.9 (2048 x 4096 on 132 SMs); a product of fewer tiles (a narrow N)
// leaves the engine's SMs idle where cuBLAS would split K.  perf-log: chooseMatmulAllReduce
constexpr size_t kMmarEngineLongKMinWavesX4 = 8;  // in quarter waves: 2 waves
// The pipeline when each chunk's GEMM fills 1.25 waves of 128 x 128 tiles (165 at
// 132 SMs): level at 160 tiles, ahead from 192.             perf-log: chooseMatmulReduceScatter
constexpr size_t kMmrsPipelineMinWavesX4 = 5;  // in quarter waves: 1.25 waves
// The scatter path (the GEMM storing into the owners' workspaces) only below
// fcReduceScatter's copy-engine crossover: its peer stores grow with the products.
// = kCeReduceScatterMin by design.                         perf-log: ceMinBytes
constexpr size_t kMmrsScatterMax = kCeReduceScatterMin;
// The engine's pieces of a block are at least 2 MiB: a piece costs a gate and a copy.
//                                                          perf-log: matmulReduceScatterEnginePieces
constexpr size_t kMmrsEngineMinPieceBytes = 2 * MiB;
// The epilogue add's tiles interleaved (the peer's pieces ahead of ours, so that the
// reads of its partials spread over the GEMM instead of crowding its second half) where
// K is at most 2048: 2 H200s, 2 ranks, fc-bench mmrs, two runs each (forty-seventh
// session): 8 pieces, lead 2 took 3-6 % off at 8192 x 3072-8192 x 2048 and 12288 /
// 16384 x 4096 x 2048 (12288 x 4096: 325.7 -> 305.6 us), 1-2 % at 4096 x 4096, 9 % at
// K 1536; beyond K 2048 it added 2-5 % (8192 x 4096 x 2560 / 3072, 8192 x 5120 x 2560).
//                                                          perf-log: matmulReduceScatterInterleave
constexpr size_t kMmrsInterleaveMaxK = 2048;
// ... at K 1024 in 16 pieces, lead 4: 8192 x 4096 x 1024 188.0 -> 161.4 us, against
// 182.4 in 8 pieces (lead 2). Where a block has fewer cluster rows than pieces, a piece
// is one cluster row.                                      perf-log: matmulReduceScatterInterleave
constexpr size_t kMmrsInterleaveShortK = 1024;
constexpr int64_t kMmrsInterleavePieces = 8, kMmrsInterleaveShortKPieces = 16;
// ... the lead a quarter of the pieces, at least 2: lead 1 was behind everywhere (our
// tiles wait for a piece the peer computes in the same wave).
constexpr int kMmrsInterleaveMinLead = 2;
// ... from blocks of 8 cluster rows (2048 rows): at 2048 x 4096 x 2048 (4 of them) lead
// 2 added 5 us (forty-third session).                     perf-log: matmulReduceScatterInterleave
constexpr int64_t kMmrsInterleaveMinClusterRows = 8;

// ---- The decode GEMM (fc::Gemm: src/gemm/decode) ----------------------------------------
// CUTLASS's swapped ping-pong kernel instead of cuBLASLt only where K is at least 1.5x N:
// one H200, tools/probes/decode-gemm, 12-15 % faster at 1-48 x 4096 x 7168 and 2-11 % at
// 1-32 x 5120 x 13824 (K 1.75x and 2.7x N), level or behind wherever K <= N (x 4096 x 2048,
// 5120 x 2560, 8192 x 1024 / 3584).                         perf-log: decodeGemmTokens
constexpr size_t kDecodeGemmMinKOverNx2 = 3;  // in halves: K >= 1.5 N
// ... up to 48 rows: level with cuBLASLt at 64 x 4096 x 7168 (1.00x), mixed at 64-128 rows
// (0.95-1.24x over the layers), behind from 192.
//                                                          perf-log: decodeGemmTokens
constexpr size_t kDecodeGemmMaxRows = 48;
// ... in one wave of tiles: 16 tokens a tile where N / 64 x rows / 16 tiles fit the SMs,
// else 32 a tile where those fit; where neither does (5120 x 13824 at 48 rows: 160 tiles
// on 132 SMs), the last wave's few tiles took 1.04-1.25x cuBLASLt's time.
//                                                          perf-log: decodeGemmTokens
constexpr size_t kDecodeGemmTileCols = 64;
// The decode engine (forced only: FC_MMAR_ALGO=decode) to 256 rows, its GEMM on tiles of
// 16, 32, 64 or 128 tokens. Up to 48 rows in one wave (pushes at the end of one wave:
// tiles that end in waves cost the GEMM, 16 x 4096 x 2048 on a third of the SMs 1.42x;
// at 48 x 4096 a second wave of 16-token tiles 1.05-1.23x against one of 32-token tiles
// 0.88-1.07x cuBLASLt). Auto takes it nowhere: on 2 H200s, forced against auto at 1-128
// rows of the four issue-42 layers, 0.94-1.05x at long K and up to 1.43x behind at short K
// (perf-log, fortieth session).                             perf-log: decodeGemmTokens
constexpr size_t kDecodeEngineMaxRows = 256;
// ... above 48 rows, the tile that pads the fewest rows, then the fewest waves, then the
// narrowest: a part-filled last token tile cost as much as a wave there (one H200,
// decode-gemm, 64-256 x 4096 / 5120 / 8192: 192 x 4096 x 2048 on 64 x 128 tiles, one wave,
// 14.3 us, on 64 x 64, two waves, 11.9; 96 x 8192 x 3584 24.4 against 20.5 on 64 x 32,
// three waves). The rule picked the fastest of the four tiles at 19 of the 20 measured
// cells and one 0.01x behind it at the 20th (0.86-1.39x cuBLASLt; the one-wave rule
// 0.86-1.53x, and no tile at 4 cells). At most 3 waves: the most measured.
//                                                          perf-log: decodeGemmTokens
constexpr size_t kDecodeEngineOneWaveMaxRows = 48, kDecodeEngineMaxWaves = 3;

// ---- fcMatmulAllReduce ---------------------------------------------------------------------
// The one decode kernel (GEMV + Lamport pushes per tile): its FMA form for one row (from
// 2 rows CUDA-core FMAs fall behind cuBLAS's tensor cores), its MMA form (tensor cores)
// from 2 rows where N / 32 tiles are at most its CTAs (one tile each: at N = 5120 and
// 8192 the SMs that take two fell behind the GEMM + all-reduce), up to 8 rows: its
// instantiation for 9-16 rows (both halves of the MMA's 16) fell 0.05-0.13 us behind the
// GEMM + fcAllReduce at 10-16 x 4096 x 2048 where 2-8 rows were 0.9-1.1 us ahead (2 H200s,
// thirty-fifth session; the norm forms level at 10-16).
//                                                          perf-log: chooseMatmulAllReduce
constexpr size_t kGemvFmaMaxRows = 1;
// The kernel's form at 2 rows where the MMA form's tiles of 32 columns outnumber its CTAs
// (N > 4096 on 128; auto's path takes the kernel there only when forced, so far) and the
// weight is within kMmarOneKernelMaxWeight (where auto runs the kernel at all): the FMA
// form. One H200, world size 1 (FC_MMAR_ALGO=fused), the weight cold (each call its own
// copy, as in a model), sixty-second session, FMA against MMA: 2 x 8192 x 1024 6.91 / 8.02
// us, 2 x 7168 x 2048 10.09 / 12.23, 2 x 6144 x 2048 9.32 / 10.62, 2 x 5120 x 2560 10.29 /
// 10.78, 2 x 8192 x 3584 16.82 / 18.06. Where the tiles are one a CTA the MMA form leads (2
// x 4096 x 2048 8.04 / 8.50, 2 x 2048 x 2048 6.29 / 6.88; the FMA form 0.2-0.3 ahead only at
// 4096 x 1024 and 4096 x 7168), from 3 rows everywhere (3 x 5120 x 2560 10.85 / 13.21), and
// past the weight bound, where the FMA form's few busy warps fall behind (2 x 5120 x 13824,
// Qwen2.5-32B's down_proj at TP 2, forced: 55.84 / 41.48).
//                                                          perf-log: gemvAllReduceMma
constexpr size_t kGemvFmaManyTilesMaxRows = 2;
constexpr size_t kMmarOneKernelMaxRows = 8;
// ... the MMA form where M x K x W is at most this (2 ranks: 8 rows at K = 4096, 4 at
// 7168; 4 ranks: half that). Past it the kernel's MMAs per tile and its
// (W - 1) pushes per pack cost more than the fusion saves (on 4 H200s, at 16 x 4096 x
// 7168: 1.03x the GEMM + all-reduce at 2 ranks; 8 x 4096 x 4096 1.01x at 4 ranks).
//                                                          perf-log: chooseMatmulAllReduce
constexpr size_t kGemvMmaMaxRowsKRanks = 65536;
constexpr int kGemvMmaMaxRanks = 4;  // timed at 2 and 4 ranks
// ... and only where the all-reduce path's GEMM is cuBLASLt's: where the decode GEMM takes
// the shape (K >= 1.5 N: decodeGemmTokens), that GEMM alone is faster than the MMA form's
// whole kernel with no peers at all. One H200, world size 1 (FC_MMAR_ALGO=fused, no pushes
// and no polls), fifty-third session: 2-8 x 4096 x 7168 20.6-20.9 us against the decode
// GEMM's 16.9-17.1 (cuBLASLt's 18.6-19.0; two rounds' means), while the op's all-reduce path (the decode GEMM,
// then fcAllReduce) took 20.0 at 8 x 4096 x 7168 on 2 H200s (fortieth session): the
// kernel's own work alone is past that path's whole time. Its FMA form at one row stays:
// 18.2-18.4 alone, 19.6 at 2 ranks (fortieth session).     perf-log: chooseMatmulAllReduce
// ... With its loads in rings in shared memory, B's rows copied whole (fifty-fourth
// session) the MMA form takes 17.7-18.1 there alone, still 1.06-1.08x the decode GEMM, and
// the link's ~1.2 us on top leaves it level with the path at best: the rule stands until
// timed at 2 ranks (the FMA form at one row: 17.0 alone).  perf-log: chooseMatmulAllReduce
// ... and either form with a weight of at most 32 Mi elements (N x K): it streams B a
// few per cent below cuBLAS's rate, which outgrows the fusion's saving with the GEMM
// (8192 x 7168: 1.02x at one row, 5120 x 13824: 1.28x).
//                                                          perf-log: chooseMatmulAllReduce
constexpr size_t kMmarOneKernelMaxWeight = size_t(32) << 20;

// The one kernel's streams of B (fused/gemv_all_reduce.cu, chooseGemvStream). The rings'
// depth: enough for kGemvRingBytesInFlight a CTA over its busiest CTA's busy warps (at
// least 2). One H200, world size 1 (FC_MMAR_ALGO=fused), fifty-fourth session, the rings'
// depth 2 / 3 / 4 against loads into registers:
// the MMA form at 2-8 x 4096 x 7168 18.7-19.3 / 19.0-19.3 / 19.0-19.5 us against 21.2-21.5,
// at 2-8 x 5120 x 13824 42.1-43.5 / 44.2-45.5 / 45.7-46.9 against 60.8-61.5 (depth 2 where
// 8 warps are busy: 80 KiB in flight); the FMA form at one row 17.0 / 17.1 / 17.2 against
// 18.2 at 4096 x 7168 (8 warps busy), 45.1 / 44.5 / 43.5 against 48.4 at 5120 x 13824 (5
// warps busy: depth 4 puts 92 KiB in flight).               perf-log: chooseGemvStream
constexpr size_t kGemvRingBytesInFlight = size_t(80) << 10;
// ... but 2 deep (the shallowest ring) in the FMA form below K = 4096 and in the MMA form
// where a warp takes fewer than 8 batches of B a tile (the two rows below). Those rows kept
// the loads in registers there, timed with one B reused by every call, which L2 then
// holds (up to ~50 MiB). A model's decode step reads each weight from HBM (fc-bench mmar
// --cold-weight: each call its own copy of B), and there the rings 2 deep beat registers
// at every such cell (sixty-first session, one H200, world size 1, two rounds, calls B-C):
// the FMA form at one row by 0.3-2.1 us (1 x 5120 x 2560 11.9 -> 9.9, 1 x 4096 x 1024 6.3
// -> 5.4, 1 x 8192 x 3584 17.9 -> 16.7, also with the weight hot: its 56 MiB do not fit),
// the MMA form at 2-8 rows by 0-1.6 (x 3584 x 3584 12.0-12.2 -> 10.4-10.6, x 4096 x 1024
// 7.3 -> 5.9-6.1, x 4096 x 2048 8.6-8.7 -> 8.0-8.3, x 8192 x 1024 level to -0.35); with the
// weight hot they cost up to 0.7 (1 x 8192 x 1024 5.05 -> 5.78; most cells 0.1-0.5). 3 or
// 4 deep were no better cold.                               perf-log: chooseGemvStream
constexpr size_t kGemvShallowRingStages = 2;
// ... the FMA form's rings 2 deep below K = 4096 (hot, the fifty-fourth session's rings
// took 0.4-0.7 us more there than registers: 1 x 4096 x 2048 5.84-6.18 against 5.44, 1 x
// 5120 x 2560 7.96-8.48 against 7.55; 4-10 batches a warp) ...
//                                                          perf-log: chooseGemvStream
constexpr size_t kGemvFmaRingMinK = 4096;
// ... and the MMA form's where a warp takes fewer than 8 batches of B (64 k each) a tile:
// hot, registers won there (the rings' start-up not repaid). Call E (fifty-fifth
// session, one H200, four alternating rounds), rings (2 deep) against registers: 2-8 x 4096
// x 1024 (4 batches) 5.18-5.22 against 4.84-4.91 us, x 2048 x 2048 (4) 5.59-5.71 against
// 5.08-5.33, x 4096 x 2048 (4) 5.71-6.20 against 5.64-5.94, x 4096 x 3072 (6) 7.66-7.89
// against 7.21-7.79, x 8192 x 1024 (4) 5.78-6.31 against 5.56-5.75; from 8 batches the
// rings lead or tie: x 5120 x 2560 (10) 8.79-9.37 against 9.19-9.66, x 8192 x 2560 (10)
// 11.25-12.10 against 11.95-12.60, x 5120 x 3072 (12) 10.03-10.62 against 11.43-11.64,
// x 4096 x 7168 (14) 17.5-17.8 against 20.8-21.1 (call D); mixed at 5-8 (x 4096 x 2560 (5)
// -0.15 / -0.05 / +0.05 at 2 / 4 / 8 rows, x 4096 x 3584 (7) +0.26 / -0.05 / -0.27, x 5120
// x 1536 (6) -0.08, x 5120 x 2048 (8) -0.16 / -0.14 / +0.23). Rings 3 or 4 deep did not
// change that (call F).                                      perf-log: chooseGemvStream
constexpr size_t kGemvMmaRingMinBatches = 8;
// ... prefetch: each warp brings the first batch of its first tile into L2 before the
// kernel's PDL wait, while the previous kernel ends. Weight cold, rings as above, one H200,
// world size 1, two rounds: the FMA form at one row 0.25-0.5 us faster at 7 of 9 layers
// (sixty-first session, call E: 1 x 3584 x 3584 10.13 -> 9.71, 1 x 8192 x 3584 16.66 ->
// 16.15, 1 x 4096 x 7168 17.42 -> 17.04, 1 x 8192 x 1024 6.96 -> 6.61), level at 4096 x 1024
// and 2048 x 2048; 2 batches level or slower. The MMA form was 0.3-0.8 slower with it while
// the prefetch was the bulk-copy unit's (a cp.async.bulk.prefetch per lane); by
// prefetch.global.L2 lines 0-0.7 faster at 2-8 rows (sixty-second session, call C: 2-8 x
// 4096 x 7168 18.25-18.52 -> 17.56-17.94, 2-8 x 3584 x 3584 10.47-10.63 -> 10.00-10.18, 2-8
// x 4096 x 2048 8.02-8.36 -> 7.76-8.11, level at 4096 x 1024), the FMA form's level with its
// bulk figures (-0.15 to +0.06); 2 batches by lines mixed (-0.3 to +0.4). With the weight
// hot and loads in registers the fifty-sixth session had found the FMA form's gain at 6 of
// 10 layers and 0.2-0.26 us losses at 2.                    perf-log: chooseGemvStream
constexpr int kGemvPrefetchBatches = 1;
// ... rotate: the MMA form's tiles start their batches of K at their own place from K =
// 3072. Two rounds each (same session): 2-8 rows at K 3584-13824 0.2-2.3 us faster (2-8 x 4096 x
// 7168 19.0-19.5 -> 18.5-19.2, x 5120 x 13824 41.3-42.9 -> 40.2-40.8, x 8192 x 7168 34.6-36.0
// -> 33.2-35.0, x 8192 x 3584 19.0-19.4 -> 18.3-18.7), 0.1 slower or level at K 1024-2560;
// the FMA form's rings level or up to 0.5 slower (1 x 5120 x 13824 44.3 -> 44.8).
//                                                          perf-log: chooseGemvStream
constexpr size_t kGemvMmaRotateMinK = 3072;
// ... rowCopies: the MMA form's copies of B by rows (4 rows of 128 bytes an instruction; the
// lanes then read each other's copies) instead of each lane's own packs (8 rows of 64
// bytes), from K = 3072 where every CTA has as many tiles. Three rounds each (same
// session), 2-8 rows: 4096 x 7168 18.8-19.2 -> 17.7-18.1 us, 8192 x 7168 33.8-34.4 ->
// 31.8-32.2, 8192 x 3584 18.6-18.9 -> 17.7-18.0, 3584 x 9472 21.0-21.4 -> 20.5-20.8; slower
// at K <= 2560 (4096 x 2048 +0.3-0.5, 5120 x 2560 +0.8-1.4, 8192 x 1024 +0.1-0.5) and at N
// 5120, where 32 of the 128 CTAs take two tiles (5120 x 13824 +0.8-1.2, x 6912 +0.4-0.6;
// not understood).                                         perf-log: chooseGemvStream
constexpr size_t kGemvRowCopiesMinK = 3072;

// The reduce-scatter + all-gather (plain form) only at 2 ranks, from 4096 rows per rank
// (1-8 % ahead at 8192 rows; behind at 2048; the norm forms behind everywhere).
//                                                          perf-log: chooseMatmulAllReduce
constexpr int kMmarSplitRanks = 2;
constexpr size_t kMmarSplitMinRowsPerRank = 4096;
// Where the engine all-gathers in its epilogue (no all-gather after it): from 1024 rows
// per rank, the plain form (2048 x 4096 x 2048: 0.94x GEMM + fcAllReduce; 8192 rows 0.70x)
// and, since their local norm holds rows in groups (thirty-third session), the norm forms
// (0.96x GEMM + fcAllReduceResidualRMSNorm at 2048 x 4096 x 2048, whose norm rides in the
// all-reduce's last pass; 0.84 / 0.80x at 4096 / 8192 rows; before, 1.15x at 2048).
//                                                          perf-log: chooseMatmulAllReduce
constexpr size_t kMmarGatherMinRowsPerRank = 1024;

// ---- The GEMM engine's tiles ------------------------------------------------------------
// 128 x 128 ping-pong tiles when they need fewer waves than 128 x 256 ones (counted in
// 128 x 256 tile times) by more than 5 %.                  perf-log: engineSmallTiles
constexpr double kSmallTilesWaveRatio = 0.95;
// ... and whenever B is over 128 MiB (far beyond L2).       perf-log: engineSmallTiles
constexpr size_t kSmallTilesMinBBytes = 128 * MiB;
// The reduce-scatter engine also where K <= 2048: the ping-pong schedule runs a tile's
// epilogue under the other warp group's mainloop.          perf-log: engineSmallTiles
constexpr size_t kScatterSmallTilesMaxK = 2048;
// ... and fcMatmulAllReduce's gathering engine at every K: each of its tiles stores a
// tile into the peer's memory (a partial, or a sum beside our own copy), and in the
// cooperative 128 x 256 kernel the whole CTA waits for those stores before its next
// mainloop. fc-bench mmarstages (2 H200s, thirty-fourth session): the NVLink stores cost
// 75 / 99 / 100 us over the same stores made locally at 4096 x 5120 x 2560, 8192 x 5120 x
// 2560, 8192 x 4096 x 7168 (128 x 256), 20-44 us at K 2048 (128 x 128 by the rule above).
//                                                          perf-log: engineSmallTiles
// The all-gather engine's tile width (engineTileN): the least waves x width x cost, the
// columns each SM computes (tile rows alike) weighted by what a column costs on that
// tile against 128 x 128 ping-pong; ties to the wider. cuBLASLt picks its tiles the same
// way (at 512 x 3072, 96 x 128 in its column-major view: one wave of 128 tiles, where
// 128-wide ones leave 36 of 132 SMs idle).
struct TileWidth {
  int width;
  double cost;    // per column, against 128 x 128 ping-pong
  bool pingpong;  // where B is beyond L2 (kSmallTilesMinBBytes), only these
};
// 128 x 96 ping-pong: 1.07-1.10 in one wave (0.80-0.83x the 128-wide tiles' time at 256-768
// x 3072 x 4096, 256 x 5120 / 6144, against 0.75 in columns), 1.10-1.24 over full waves
// (1024 x 4096 x 4096, 512 / 1024 x 14336 x 4096); 128 x 256 cooperative: engineSmallTiles'
// 5 %; 128 x 192 cooperative: 1.0, the best fit of a grid of 67 shapes (256-4096 rows, N
// 3072-27648; gemm-configs, one H200, forty-first session): the rule's width takes 1.005x
// the best of the four's time there (geometric mean; 1.066 with 128 / 256 alone), and
// nowhere more than it did with 128 / 256 alone. 128 x 224 cooperative: 0.97, 128 x 160
// cooperative: 0.98, for N with a factor 7 or 5 (3584 / 7168 / 14336; 2560 / 5120 / 10240):
// the best fit of a grid of 73 shapes (gemm-configs, one H200, forty-eighth session; flat
// for 0.97-0.98 and 0.97-0.99): the rule's width 1.0003x the best of the six's time, 1.053x
// cuBLASLt's (1.085 with the four), 26 shapes moved, 25 gained 1-16 % (2048 x 3584 x 5120
// 102.0 -> 91.0 us, cuBLASLt 99.3; 1024 x 5120 x 5120 78.5 -> 67.8), one lost 2 %.
//                                                                  perf-log: engineTileN
constexpr TileWidth kTileWidths[] = {{256, kSmallTilesWaveRatio, false}, {224, 0.97, false}, {192, 1.0, false},
                                     {160, 0.98, false},                 {128, 1.0, true},   {96, 1.15, true}};
// The reduce-scatter engine's two (engineSmallTiles), weighed alike.
constexpr TileWidth kTwoTileWidths[] = {{256, kSmallTilesWaveRatio, false}, {128, 1.0, true}};
// The engine's bands (engineBands): only where B is beyond 64 MiB, the band's rows of A
// within 24 MiB (half of L2). One H200, interleaved: 8192 x 14336 x 4096 in 1.03x
// cuBLASLt's time with bands of 8 against 1.07 unbanded; at K = 6912 and 16384 bands of 8
// (28 and 64 MiB of A) took 1.32x where bands of 2-4 take 1.01-1.02; where B (nearly)
// fits, banding costs A's reuse: 8192 x 3584 x 5120 (35 MiB) 1.15x with bands of 4, 1.01
// without.                                                  perf-log: engine bands
constexpr size_t kBandsMinBBytes = 64 * MiB;
constexpr size_t kBandsMaxABytes = 24 * MiB;
// ... and never where CUTLASS would pad the tile grid to whole bands by more than 3 %:
// it pads both M (in clusters) and N (in tiles) up to the band and runs the padding as
// tiles. 1536 / 3072 x 14336 x 4096 (6 / 12 cluster rows in bands of 4 / 8) took 1.18-1.64x
// the time with bands of 2 / 4 across the four widths; 768 x 8192 x 8192 (3 rows in bands
// of 2) 1.04-1.66x that of no bands. gemm-configs, one H200, forty-first session.
//                                                          perf-log: engine bands
constexpr size_t kBandsMaxPaddingPercent = 3;

// ======================================================================================

// Tiles of 128 x 128 (x tileN) in a rows x N product.
size_t tiles(size_t rows, size_t N, size_t tileN = 128) { return (rows + 127) / 128 * ((N + tileN - 1) / tileN); }

// Whether `tiles` fill at least quarterWaves / 4 waves of smCount SMs.
bool fillsWaves(size_t tileCount, size_t quarterWaves, int smCount) {
  return tileCount * 4 >= quarterWaves * size_t(smCount);
}

// The all-gather engine's GEMM on w-wide tiles as its persistent grid runs it, in seconds
// (without its fixed costs): CTA c takes tiles c, c + grid, c + 2 grid, ... in the
// scheduler's order (readiness_scheduler.cuh: our shard's rows of tiles first, then rank+1's,
// ..., each row of tiles along N), and a tile reading a peer's rows starts no earlier than
// that shard has landed. The copy engine pulls the shards one after another, so the j-th
// lands at kPullFixedSeconds + j shards' bytes at kPullBytesPerSecond. Without pulls (every
// row in place) this is the GEMM alone: ceil(tiles / grid) tiles on the busiest SM, the
// waves x width x cost of cheapestTileWidth.
double engineMakespan(size_t M, size_t N, size_t K, int nranks, int smCount, const TileWidth& w, bool pulls) {
  const size_t ranks = size_t(std::max(nranks, 1)), shardRows = std::max<size_t>(M / ranks, 1);
  const size_t cols = (N + size_t(w.width) - 1) / size_t(w.width), total = tiles(M, N, size_t(w.width));
  const size_t grid = std::min(size_t(std::max(smCount, 1)), std::max<size_t>(total, 1));
  const double tile = 2.0 * 128.0 * double(w.width) * double(K) * w.cost / kEngineSmFlopsPerSecond;
  // Shard s's tiles: from the first row of tiles holding any of its rows (a row of tiles
  // across two shards waits for the later one), to the next shard's first.
  auto first = [&](size_t s) { return s == 0 ? 0 : std::min(total, ((s * shardRows + 1 + 127) / 128 - 1) * cols); };
  // Tiles k < x with k = c (mod grid).
  auto upTo = [&](size_t x, size_t c) { return x > c ? (x - c + grid - 1) / grid : 0; };
  auto finish = [&](size_t c) {  // CTA c's
    double t = 0;
    for (size_t s = 0; s < ranks; ++s) {
      const size_t n = upTo(s + 1 < ranks ? first(s + 1) : total, c) - upTo(first(s), c);
      if (n == 0) continue;
      const double landed = pulls && s > 0 ? kPullFixedSeconds + double(s * shardRows * K * 2) / kPullBytesPerSecond : 0;
      t = std::max(t, landed) + double(n) * tile;
    }
    return t;
  };
  // upTo(x, c) steps only at c = x mod grid, so a CTA's counts (and finish) are those of
  // the nearest such step at or below it: the busiest CTA is among CTA 0 and the steps of
  // the shards' boundaries. O(ranks^2) on the host, not O(grid x ranks).
  double makespan = finish(0);
  for (size_t s = 1; s <= ranks; ++s) makespan = std::max(makespan, finish((s < ranks ? first(s) : total) % grid));
  return makespan;
}

// Whether a width may run: only the ping-pong ones where B is beyond kSmallTilesMinBBytes.
bool widthRuns(const TileWidth& w, size_t N, size_t K) { return w.pingpong || N * K * 2 <= kSmallTilesMinBBytes; }

}  // namespace

// ---- All-reduce ----------------------------------------------------------------------------

size_t oneShotMaxBytes(int nranks) {
  return nranks <= 2 ? kOneShotMax2Ranks : nranks <= 4 ? kOneShotMax4Ranks : kOneShotMaxWide;
}

size_t lamportMaxBytes(int nranks) {
  return nranks <= kLamportOneShotMaxRanks ? lamportSlotBytes(nranks) : kLamportOneShotMaxWide;
}

bool lamportTwoShotAuto(int nranks) { return nranks <= kLamportTwoShotMaxRanks; }

bool lamportSoloCtas(size_t packsPerThread) { return packsPerThread >= kLamportSoloPacks; }

bool lamportWideCtas(size_t packsPerCta, size_t ctaThreads, size_t wideThreads) {
  return packsPerCta > ctaThreads && packsPerCta <= wideThreads;
}

size_t ceAllReduceMinBytes(int) { return kCeAllReduceMin; }

AllReduceAlgo chooseAllReduce(const AllReduceQuery& q) {
  const int W = q.nranks;
  // The copy-engine all-reduce splits the buffer into W equal slices.
  const bool ceFits = W > 1 && q.count % size_t(W) == 0;
  switch (q.forced) {
    case AllReduceAlgo::OneShot:
    case AllReduceAlgo::TwoShot:
    case AllReduceAlgo::LamportTwoShot: return q.forced;
    case AllReduceAlgo::CopyEngine: return ceFits ? AllReduceAlgo::CopyEngine : AllReduceAlgo::TwoShot;
    case AllReduceAlgo::Auto: break;
  }
  if (q.bytes <= oneShotMaxBytes(W) && q.oneShotFits) return AllReduceAlgo::OneShot;
  if (lamportTwoShotAuto(W)) return AllReduceAlgo::LamportTwoShot;
  if (ceFits && q.bytes >= ceAllReduceMinBytes(W)) return AllReduceAlgo::CopyEngine;
  return AllReduceAlgo::TwoShot;
}

bool oneShotIsLamport(int nranks, size_t bytes, uint64_t maxOverride, AllReduceAlgo forced) {
  const size_t most = maxOverride ? size_t(maxOverride) : lamportMaxBytes(nranks);
  return bytes <= most && forced != AllReduceAlgo::OneShot;
}

// ---- Reduce-scatter, all-gather -------------------------------------------------------------

size_t ceReduceScatterMinBytes(int) { return kCeReduceScatterMin; }
size_t ceAllGatherMinBytes(int) { return kCeAllGatherMin; }

MoveAlgo chooseReduceScatter(int nranks, MoveAlgo forced, size_t block, size_t total) {
  if (nranks < 2) return MoveAlgo::Sm;  // a copy
  const bool fits = block <= lamportSlotBytes(nranks);
  if (forced == MoveAlgo::Lamport) return fits ? MoveAlgo::Lamport : MoveAlgo::Sm;
  if (forced != MoveAlgo::Auto) return forced;
  if (nranks <= kLamportReduceScatterMaxRanks && fits) return MoveAlgo::Lamport;
  return total >= ceReduceScatterMinBytes(nranks) ? MoveAlgo::CopyEngine : MoveAlgo::Sm;
}

MoveAlgo chooseAllGather(int nranks, MoveAlgo forced, size_t bytes) {
  if (nranks < 2) return MoveAlgo::Sm;
  const bool ce = forced == MoveAlgo::CopyEngine || (forced == MoveAlgo::Auto && bytes >= ceAllGatherMinBytes(nranks));
  return ce ? MoveAlgo::CopyEngine : MoveAlgo::Sm;
}

// ---- All-reduce + RMSNorm -------------------------------------------------------------------

size_t allReduceNormOneKernelMaxBytes(int nranks) {
  return nranks <= kNormOneKernelFromZeroMaxRanks ? lamportMaxBytes(nranks)
                                                  : std::min(kNormOneKernelMaxWide, lamportMaxBytes(nranks));
}

size_t allReduceNormOneKernelMaxRows(int nranks, size_t rowBytes) {
  if (nranks > kNormOneKernelFromZeroMaxRanks) return SIZE_MAX;
  const bool shortRows = rowBytes > 0 && rowBytes <= kNormOneKernelShortRowBytes;
  return shortRows ? kNormOneKernelShortRowsMaxRows : kNormOneKernelMaxRows;
}

size_t allReduceNormOneKernelAboveBytes(int nranks, size_t rowBytes) {
  const bool longRows = nranks <= kNormOneKernelLongRowsMaxRanks && rowBytes >= kNormOneKernelLongRowBytes;
  return nranks <= kNormOneKernelFromZeroMaxRanks || longRows ? 0 : kNormOneKernelAboveWide;
}

bool allReduceNormTwoShotAuto(int nranks) { return nranks <= kNormTwoShotMaxRanks && lamportTwoShotAuto(nranks); }

NormPath chooseAllReduceNorm(const NormQuery& q) {
  // The two-shot kernel where it runs: up to 4 ranks (lamportTwoShotAuto), rows within half
  // a push slot (twoShotFits).
  const bool twoShotRuns = lamportTwoShotAuto(q.nranks) && q.twoShotFits;
  switch (q.forced) {
    case NormAlgo::Unfused:
      return NormPath::Unfused;
    case NormAlgo::OneKernel:  // "fused": the one kernel to its push slot, the two-shot beyond
      if (q.bytes <= lamportSlotBytes(q.nranks)) return NormPath::OneKernel;
      return twoShotRuns ? NormPath::TwoShot : NormPath::Unfused;
    case NormAlgo::TwoShot:  // from the first byte (a measurement and a fallback)
      return twoShotRuns ? NormPath::TwoShot : NormPath::Unfused;
    case NormAlgo::Auto:
      break;
  }
  const size_t most = q.maxOverride ? size_t(q.maxOverride) : allReduceNormOneKernelMaxBytes(q.nranks);
  const size_t rowBytes = q.rows ? q.bytes / q.rows : 0;
  if (q.bytes > allReduceNormOneKernelAboveBytes(q.nranks, rowBytes) && q.bytes <= most &&
      q.rows <= allReduceNormOneKernelMaxRows(q.nranks, rowBytes))
    return NormPath::OneKernel;
  const bool shortRows = rowBytes <= kNormTwoShotShortRowBytes && q.rows >= kNormTwoShotShortRowsMinRows;
  return allReduceNormTwoShotAuto(q.nranks) && q.twoShotFits && !shortRows ? NormPath::TwoShot : NormPath::Unfused;
}

unsigned normTwoShotClusterCtas(size_t blockRows, size_t rowPacks, size_t maxCtas) {
  unsigned ctas = 1;
  while (ctas * 2 <= kNormTwoShotMaxClusterCtas && blockRows * ctas * 2 <= maxCtas &&
         rowPacks / (ctas * 2) >= kNormTwoShotMinClusterPacks)
    ctas *= 2;
  return ctas;
}

// Whole rounds of the clusters only where a CTA then gets fewer rows: 2 H200s, 512 x 5120
// 27.2 against 30.8 us, 2048 x 7168 106 against 151, but 600 x 5120 34.9 against 32.0 (3
// passes instead of 2, 3 rows a CTA either way).             perf-log: normTwoShotBlockRows
size_t normTwoShotBlockRows(size_t tokens, int nranks, size_t blockCap, size_t rowPacks, size_t maxCtas,
                            bool aligned) {
  if (!aligned || blockCap == 0 || tokens <= size_t(nranks) * blockCap) return blockCap;
  const size_t ctas = normTwoShotClusterCtas(blockCap, rowPacks, maxCtas),
               clusters = blockCap < maxCtas / ctas ? blockCap : maxCtas / ctas;
  if (clusters == 0) return blockCap;
  const size_t W = size_t(nranks), whole = blockCap / clusters * clusters;
  // A CTA's rows of the call in passes of `rows` rows per block (ceil(rows / clusters)
  // a pass, fewer in the last).
  auto rounds = [&](size_t rows) {
    const size_t passRows = W * rows, passes = (tokens + passRows - 1) / passRows,
                 lastBlock = (tokens - (passes - 1) * passRows + W - 1) / W;
    return (passes - 1) * ((rows + clusters - 1) / clusters) + (lastBlock + clusters - 1) / clusters;
  };
  // Where both give a CTA as many rows, the fuller passes: fewer of them.
  return rounds(whole) < rounds(blockCap) ? whole : blockCap;
}

uint32_t normClusterPacks(size_t rowPacks, size_t ctaThreads, bool wideCtas) {
  return rowPacks <= ctaThreads || (wideCtas && rowPacks <= kNormOneWideCtaMaxPacks) ? 0u : kNormClusterPacks;
}

uint32_t normLamportSpins(size_t tokens, uint32_t commSpins, bool commSpinsSet) {
  return commSpinsSet || tokens > kNormSpinsMaxRows ? commSpins : kNormSpins;
}

bool normWideCtas(size_t sharePacks, size_t ctaThreads, size_t wideThreads) {
  return sharePacks > ctaThreads && sharePacks <= wideThreads;
}

bool normRowsOwnCtas(size_t tokens, size_t rowPacks, int nranks, size_t maxCtas, size_t ctaThreads, size_t resident) {
  return nranks == kNormRowsOwnCtasRanks && rowPacks <= ctaThreads && tokens > maxCtas && tokens <= resident;
}

size_t normRowCtas(size_t tokens, size_t maxCtas, size_t rowCtas, size_t resident) {
  size_t cap = rowCtas != 0 ? rowCtas : maxCtas;
  cap = cap < resident ? cap : resident;
  const size_t grid = tokens < cap ? tokens : cap;
  return grid > 0 ? grid : 1;
}

int residualNormRowsPerCta(size_t tokens, size_t rowPacks, size_t packsPerThread, int forced) {
  if (packsPerThread == 0 || packsPerThread > kNormLocalRowsMaxPacks / 2) return 1;
  const bool many = tokens * rowPacks * 16 >= kNormLocalRowsMinBytes;
  int rows = forced > 0 ? forced : many ? int(kNormLocalRowsMaxPacks) : 1;
  while (rows > 1 && size_t(rows) * packsPerThread > kNormLocalRowsMaxPacks) rows /= 2;
  return rows;
}

int residualNormRegPacks(size_t rowPacks, size_t maxThreads) {
  if (rowPacks < kNormRegMinPacks) return 0;
  if (rowPacks < maxThreads) return 1;
  return rowPacks <= 2 * maxThreads ? 2 : 0;
}

// ---- All-gather + GEMM ----------------------------------------------------------------------

namespace {
bool agmmPipelineFills(const AllGatherMatmulQuery& q) {
  const size_t shardRows = q.M / size_t(q.nranks);
  return shardRows >= kAgmmPipelineMinShardRows && fillsWaves(tiles(shardRows, q.N), kAgmmPipelineMinWavesX4, q.gpuSms);
}

FusedAlgo allGatherMatmulAuto(const AllGatherMatmulQuery& q) {
  const size_t shardRows = q.M / size_t(q.nranks);
  const bool pipelineFills = agmmPipelineFills(q);
  const bool wideN = q.N > kAgmmEngineMaxNK;
  const bool engineNK = q.K <= kAgmmEngineMaxNK &&
                        (!wideN || (q.nranks == 2 && q.N * q.K * 2 <= kSmallTilesMinBBytes &&
                                    shardRows <= kAgmmEngineWideNMaxShardRows));
  const bool engineShape = shardRows >= kAgmmEngineMinShardRows && engineNK &&
                           tiles(q.M, q.N, 256) >= kAgmmEngineMinWaves * size_t(q.engineSms);
  if (engineShape && (q.nranks == 2 || (q.nranks <= kAgmmEngineMaxRanks &&
                                        (shardRows <= kAgmmEngineWideMaxShardRows || !pipelineFills))))
    return FusedAlgo::Engine;
  // Smaller shards at 2 ranks: where the model puts the engine ahead of the unfused path
  // (beyond N 8192 ahead of the pipeline too).
  bool modelEngine = false;
  if (q.nranks == 2 && q.enginePushes && engineNK && shardRows >= kAgmmEngineModelMinShardRows &&
      shardRows < kAgmmEngineMinShardRows && shardRows % kEngineClusterRows == 0) {
    const int width = allGatherEngineTileN(q.M, q.N, q.K, q.nranks, q.engineSms);
    modelEngine = allGatherEngineSeconds(q.M, q.N, q.K, q.nranks, q.engineSms, width) <=
                  kAgmmEngineModelMargin * allGatherUnfusedSeconds(q.M, q.N, q.K, q.nranks, q.gpuSms);
  }
  if (pipelineFills && !(modelEngine && wideN)) return FusedAlgo::Pipeline;
  if (modelEngine) return FusedAlgo::Engine;
  // One cluster row a shard, beyond N 8192: by the engine's wave fill.
  if (q.nranks == 2 && q.enginePushes && engineNK && wideN && shardRows == kEngineClusterRows) {
    const size_t width = size_t(allGatherEngineTileN(q.M, q.N, q.K, q.nranks, q.engineSms));
    const size_t count = tiles(q.M, q.N, width), sms = size_t(std::max(q.engineSms, 1));
    const size_t waves = (count + sms - 1) / sms;
    if (double(count) >= kAgmmEngineOneClusterMinWaveFill * double(waves * sms)) return FusedAlgo::Engine;
  }
  return FusedAlgo::Unfused;
}
}  // namespace

FusedAlgo chooseAllGatherMatmul(const AllGatherMatmulQuery& q) {
  FusedAlgo path = q.forced == FusedAlgo::Auto ? allGatherMatmulAuto(q) : q.forced;
  // A shard beyond a workspace slot: the engine cannot take it; the pipeline runs in
  // passes of rows instead of the all-gather in front of one GEMM (unfused), which
  // exposes the whole all-gather.                            perf-log: chooseAllGatherMatmul
  if (path == FusedAlgo::Engine && !q.engineTakes)
    path = q.forced == FusedAlgo::Engine || (q.pipelineInPasses && agmmPipelineFills(q)) ? FusedAlgo::Pipeline
                                                                                       : FusedAlgo::Unfused;
  if (path == FusedAlgo::Pipeline && !q.pipelineFits && !q.pipelineInPasses) path = FusedAlgo::Unfused;
  return path;
}

MoveAlgo allGatherMatmulGather(int nranks, size_t shardBytes, bool intoCallerBuffer) {
  if (!intoCallerBuffer && nranks >= 2 && nranks <= kAgmmLamportGatherMaxRanks && shardBytes <= kAgmmLamportGatherMax)
    return MoveAlgo::Lamport;
  // fcAllGather's own rule, not its FC_ALLGATHER_ALGO.
  return chooseAllGather(nranks, MoveAlgo::Auto, size_t(nranks) * shardBytes);
}

double pipelinePullSeconds(size_t bytes) { return double(bytes) / kPullBytesPerSecond + kPullFixedSeconds; }

double pipelineGemmSeconds(size_t rows, size_t N, size_t K) {
  return 2.0 * double(rows) * double(N) * double(K) / kGemmFlopsPerSecond + kGemmFixedSeconds;
}

// ---- GEMM + reduce-scatter ------------------------------------------------------------------

MmrsPath chooseMatmulReduceScatter(const MatmulReduceScatterQuery& q) {
  const bool pipelineFits = q.chunkRows > 0;
  const bool scatterFits = q.partialBytes <= std::min(q.workspaceBytes, kMmrsScatterMax);
  const MmrsPath fallback = q.lamportFits ? MmrsPath::Lamport : scatterFits ? MmrsPath::Scatter : MmrsPath::Staged;
  switch (q.forced) {
    case FusedAlgo::Engine:
      return q.engineFits ? MmrsPath::Engine : pipelineFits ? MmrsPath::Pipeline : fallback;
    case FusedAlgo::Pipeline: return pipelineFits ? MmrsPath::Pipeline : fallback;
    case FusedAlgo::Unfused: return fallback;
    case FusedAlgo::Auto: break;
  }
  const bool kFits =
      q.K <= kMmrsEngineMaxK ||
      fillsWaves(tiles(q.M, q.N), q.allReduce ? kMmarEngineLongKMinWavesX4 : kMmrsEngineLongKMinWavesX4, q.gpuSms);
  if (q.engineFits && q.nranks == kMmrsEngineRanks && q.epilogueAdd &&
      q.M / size_t(q.nranks) >= kMmrsEngineMinBlockRows && kFits)
    return MmrsPath::Engine;
  if (pipelineFits && fillsWaves(tiles(q.chunkRows, q.N), kMmrsPipelineMinWavesX4, q.gpuSms)) return MmrsPath::Pipeline;
  return fallback;
}

MoveAlgo matmulReduceScatterStagedMove(int nranks, size_t partialBytes) {
  // fcReduceScatter's SM / copy-engine crossover (its Lamport kernel aside).
  return partialBytes >= ceReduceScatterMinBytes(nranks) ? MoveAlgo::CopyEngine : MoveAlgo::Sm;
}

int64_t matmulReduceScatterEnginePieces(size_t blockBytes, int64_t most) {
  return std::max<int64_t>(1, std::min<int64_t>(most, int64_t(blockBytes / kMmrsEngineMinPieceBytes)));
}

MmrsInterleave matmulReduceScatterInterleave(int64_t blockRows, size_t K, int64_t clusterRows) {
  if (clusterRows <= 0 || blockRows % clusterRows != 0 || K > kMmrsInterleaveMaxK) return {};
  const int64_t rows = blockRows / clusterRows;  // the block's cluster rows
  if (rows < kMmrsInterleaveMinClusterRows) return {};
  const int64_t want = K <= kMmrsInterleaveShortK ? kMmrsInterleaveShortKPieces : kMmrsInterleavePieces;
  const int64_t per = (rows + want - 1) / want, pieces = (rows + per - 1) / per;
  return {per * clusterRows, std::max(kMmrsInterleaveMinLead, int(pieces / 4))};
}

// ---- GEMM + all-reduce ----------------------------------------------------------------------

MatmulAllReducePath chooseMatmulAllReduce(const MatmulAllReduceQuery& q) {
  using P = MatmulAllReducePath;
  // One rank: the product is the sum (the GEMM, then the norm locally), except where the
  // one kernel is forced: it then runs with no peers, which times its own work on one
  // GPU (no pushes, no polls; the measurement of issue 42's local costs).
  if (q.nranks < 2)
    return q.forced == MatmulAllReduceAlgo::Fused && q.oneKernelFits ? P::OneKernel : P::AllReduce;
  switch (q.forced) {
    case MatmulAllReduceAlgo::Fused:
      return q.oneKernelFits ? P::OneKernel : q.rowsSplit ? P::ReduceScatterAllGather : P::AllReduce;
    case MatmulAllReduceAlgo::Engine: return q.rowsSplit ? P::ReduceScatterAllGather : P::AllReduce;
    case MatmulAllReduceAlgo::Unfused: return P::AllReduce;
    case MatmulAllReduceAlgo::Decode:
      if (q.decodeEngineFits) return P::DecodeEngine;
      break;
    default: break;
  }
  if (q.oneKernelFits && q.N * q.K <= kMmarOneKernelMaxWeight &&
      (q.M <= kGemvFmaMaxRows ||
       (q.M <= kMmarOneKernelMaxRows && q.nranks <= kGemvMmaMaxRanks &&
        q.M * q.K * size_t(q.nranks) <= kGemvMmaMaxRowsKRanks && gemvMmaOneTilePerCta(q.N, q.maxCtas) &&
        (q.decodeGemmSms == 0 || decodeGemmTokens(q.M, q.N, q.K, q.decodeGemmSms) == 0))))
    return P::OneKernel;
  if (q.rowsSplit && q.engineGathers &&
      q.M / size_t(q.nranks) >= kMmarGatherMinRowsPerRank)
    return P::ReduceScatterAllGather;
  if (q.rowsSplit && !q.norm && q.nranks == kMmarSplitRanks && q.M / size_t(q.nranks) >= kMmarSplitMinRowsPerRank)
    return P::ReduceScatterAllGather;
  return P::AllReduce;
}

bool gemvAllReduceMma(size_t M, size_t N, size_t K, int maxCtas) {
  return M > kGemvFmaMaxRows && (M > kGemvFmaManyTilesMaxRows || gemvMmaOneTilePerCta(N, maxCtas) ||
                                 N * K > kMmarOneKernelMaxWeight);
}

// Not yet measured beside the second kernel: auto keeps it.
bool gemvNormInside(int forced) { return forced == 1; }

GemvStream chooseGemvStream(const GemvStreamQuery& q) {
  GemvStream c;
  const size_t perStage = std::max<size_t>(1, q.busyWarps) * std::max<size_t>(1, q.warpStageBytes);
  const bool shallow = q.mma ? q.warpBatches < kGemvMmaRingMinBatches : q.K < kGemvFmaRingMinK;
  const size_t autoStages =
      shallow ? kGemvShallowRingStages : std::max<size_t>(2, (kGemvRingBytesInFlight + perStage - 1) / perStage);
  const size_t stages = std::min({q.stages < 0 ? autoStages : size_t(q.stages), q.fitStages,
                                  size_t(kGemvMaxRingStages)});
  c.stages = stages < 2 ? 0 : int(stages);
  c.prefetch = q.prefetch >= 0 ? q.prefetch : kGemvPrefetchBatches;
  if (c.stages == 0) return c;  // the rings' options only
  c.rotate = q.rotate < 0 ? q.mma && q.K >= kGemvMmaRotateMinK : q.rotate > 0;
  const bool sameTiles = q.tiles <= q.grid || q.tiles % std::max<size_t>(1, q.grid) == 0;
  c.rowCopies = q.mma && (q.rowCopies < 0 ? q.K >= kGemvRowCopiesMinK && sameTiles : q.rowCopies > 0);
  return c;
}

bool gemvMmaOneTilePerCta(size_t N, int maxCtas) {
  const size_t tiles = (N + kGemvMmaTileCols - 1) / kGemvMmaTileCols, ctas = size_t(maxCtas > 0 ? maxCtas : 1);
  return tiles <= ctas;
}

// ---- The decode GEMM -----------------------------------------------------------------------

namespace {

// The narrowest tile of `widths` tokens whose tiles of M x N fit one wave of smCount, or 0
// (also for no rows or no SMs).
int oneWaveTokens(size_t M, size_t N, int smCount, std::initializer_list<size_t> widths) {
  if (M == 0 || smCount <= 0) return 0;
  const size_t cols = (N + kDecodeGemmTileCols - 1) / kDecodeGemmTileCols;
  for (size_t tokens : widths)
    if (cols * ((M + tokens - 1) / tokens) <= size_t(smCount)) return int(tokens);
  return 0;
}

}  // namespace

int decodeEngineTokens(size_t M, size_t N, int smCount) {
  if (M > kDecodeEngineMaxRows) return 0;
  if (M <= kDecodeEngineOneWaveMaxRows) return oneWaveTokens(M, N, smCount, {16, 32, 64, 128});
  if (smCount <= 0) return 0;
  const size_t cols = (N + kDecodeGemmTileCols - 1) / kDecodeGemmTileCols, sms = size_t(smCount);
  int best = 0;
  size_t bestRows = 0, bestWaves = 0;
  for (size_t tokens : {16, 32, 64, 128}) {  // narrowest first: a tie keeps it
    const size_t rows = (M + tokens - 1) / tokens * tokens, waves = (cols * (rows / tokens) + sms - 1) / sms;
    if (waves > kDecodeEngineMaxWaves) continue;
    if (best == 0 || rows < bestRows || (rows == bestRows && waves < bestWaves))
      best = int(tokens), bestRows = rows, bestWaves = waves;
  }
  return best;
}

int decodeGemmTokens(size_t M, size_t N, size_t K, int smCount) {
  if (M > kDecodeGemmMaxRows || 2 * K < kDecodeGemmMinKOverNx2 * N) return 0;
  return oneWaveTokens(M, N, smCount, {16, 32});
}

// ---- The GEMM engine's tiles ----------------------------------------------------------------

namespace {

// The width of `widths` (widest first: a tie stays with the wider) of the least cost(width),
// the ping-pong ones alone where B is beyond kSmallTilesMinBBytes (128 x 128 always runs).
template <size_t kCount, class Cost>
const TileWidth& cheapest(const TileWidth (&widths)[kCount], size_t N, size_t K, Cost cost) {
  const TileWidth* best = nullptr;
  double bestCost = 0;
  for (const TileWidth& t : widths) {
    if (!widthRuns(t, N, K)) continue;
    const double c = cost(t);
    if (best == nullptr || c < bestCost) best = &t, bestCost = c;
  }
  return *best;
}

// ... of the least waves x width x cost: the GEMM alone.
template <size_t kCount>
int cheapestTileWidth(size_t M, size_t N, size_t K, int smCount, const TileWidth (&widths)[kCount]) {
  const size_t sms = size_t(std::max(smCount, 1));
  return cheapest(widths, N, K, [&](const TileWidth& t) {
           const size_t width = size_t(t.width), waves = (tiles(M, N, width) + sms - 1) / sms;
           return double(waves * width) * t.cost;
         }).width;
}

}  // namespace

bool engineSmallTiles(size_t M, size_t N, size_t K, int smCount) {
  return cheapestTileWidth(M, N, K, smCount, kTwoTileWidths) == 128;
}

int engineTileN(size_t M, size_t N, size_t K, int smCount) { return cheapestTileWidth(M, N, K, smCount, kTileWidths); }

double allGatherEngineSeconds(size_t M, size_t N, size_t K, int nranks, int smCount, int tileN) {
  for (const TileWidth& w : kTileWidths)
    if (w.width == tileN) return engineMakespan(M, N, K, nranks, smCount, w, true) + kAgmmEngineFixedSeconds;
  return 0;
}

int allGatherEngineTileN(size_t M, size_t N, size_t K, int nranks, int smCount) {
  return cheapest(kTileWidths, N, K, [&](const TileWidth& w) {
           return engineMakespan(M, N, K, nranks, smCount, w, true);
         }).width;
}

double allGatherUnfusedSeconds(size_t M, size_t N, size_t K, int nranks, int smCount) {
  auto alone = [&](const TileWidth& w) { return engineMakespan(M, N, K, 1, smCount, w, false); };
  const size_t peerBytes = (M - M / size_t(std::max(nranks, 1))) * K * 2;
  return pipelinePullSeconds(peerBytes) + alone(cheapest(kTileWidths, N, K, alone)) + kAgmmUnfusedFixedSeconds;
}

int engineBands(size_t M, size_t N, size_t K, size_t shardRows, int tileN, size_t clusterRows) {
  if (N * K * 2 <= kBandsMinBBytes || tileN <= 0 || clusterRows == 0) return 1;
  auto up = [](size_t x, size_t b) { return (x + b - 1) / b * b; };
  const size_t mClusters = up(M, clusterRows) / clusterRows;
  const size_t shardClusters = up(shardRows, clusterRows) / clusterRows;
  const size_t nTiles = up(N, size_t(tileN)) / size_t(tileN);
  // Whether the grid padded to whole bands of b has at most kBandsMaxPaddingPercent more tiles.
  auto padsLittle = [&](size_t b) {
    return up(mClusters, b) * up(nTiles, b) * 100 <= (100 + kBandsMaxPaddingPercent) * mClusters * nTiles;
  };
  size_t bands = 1;
  while (bands < 8 && 2 * bands <= shardClusters && 2 * bands * clusterRows * K * 2 <= kBandsMaxABytes &&
         padsLittle(2 * bands))
    bands *= 2;
  return int(bands);
}

bool scatterEngineSmallTiles(size_t M, size_t N, size_t K, int smCount, bool gathers) {
  return gathers || engineSmallTiles(M, N, K, smCount) || K <= kScatterSmallTilesMaxK;
}

}  // namespace fc::tuning
