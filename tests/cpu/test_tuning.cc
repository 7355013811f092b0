// The tuning module's choices pinned at 2 / 4 / 8 ranks and 132 / 114 SMs (src/tuning):
// the values are those of the rules as they stood at 12cfcd8, before they moved into the
// module (the two wave rules then assumed 132 SMs; at 114 they follow the SM count
// passed in). A change of an answer here is a change of behaviour: retune on purpose,
// with the measurement in docs/perf-log.md, and update the case.
#include <algorithm>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>

#include "tuning/tuning.h"

using namespace fc;
using namespace fc::tuning;

namespace {
constexpr size_t KiB = size_t(1) << 10, MiB = size_t(1) << 20;
}

TEST_CASE("all-reduce thresholds by world size", "[tuning]") {
  CHECK(oneShotMaxBytes(2) == 4 * MiB);
  CHECK(oneShotMaxBytes(4) == 512 * KiB);
  CHECK(oneShotMaxBytes(8) == 512 * KiB);
  CHECK(lamportMaxBytes(2) == 4 * MiB);
  CHECK(lamportMaxBytes(4) == 1 * MiB);
  CHECK(lamportMaxBytes(8) == 256 * KiB);
  CHECK(lamportTwoShotAuto(2));
  CHECK(lamportTwoShotAuto(4));
  CHECK_FALSE(lamportTwoShotAuto(8));
  for (int W : {2, 4, 8}) {
    CHECK(ceAllReduceMinBytes(W) == 64 * MiB);
    CHECK(ceReduceScatterMinBytes(W) == 32 * MiB);
    CHECK(ceAllGatherMinBytes(W) == 64 * MiB);
  }
}

TEST_CASE("fcAllReduce's choice", "[tuning]") {
  auto pick = [](int W, size_t bytes, bool fits = true, AllReduceAlgo forced = AllReduceAlgo::Auto,
                 size_t elem = 2) {
    AllReduceQuery q;
    q.forced = forced;
    q.nranks = W;
    q.bytes = bytes;
    q.count = bytes / elem;
    q.oneShotFits = fits;
    return chooseAllReduce(q);
  };
  // 2 ranks: the one-shot to its 4 MiB slot, the Lamport two-shot above.
  CHECK(pick(2, 8) == AllReduceAlgo::OneShot);
  CHECK(pick(2, 4 * MiB) == AllReduceAlgo::OneShot);
  CHECK(pick(2, 4 * MiB + 16) == AllReduceAlgo::LamportTwoShot);
  CHECK(pick(2, 256 * MiB) == AllReduceAlgo::LamportTwoShot);
  CHECK(pick(2, 1 * KiB, false) == AllReduceAlgo::LamportTwoShot);  // staged input beyond the workspace
  // 4 ranks: the one-shot to 512 KiB.
  CHECK(pick(4, 512 * KiB) == AllReduceAlgo::OneShot);
  CHECK(pick(4, 512 * KiB + 16) == AllReduceAlgo::LamportTwoShot);
  // 8 ranks: the one-shot to 512 KiB, the SM two-shot, the copy engine from 64 MiB when
  // the count splits into 8.
  CHECK(pick(8, 512 * KiB) == AllReduceAlgo::OneShot);
  CHECK(pick(8, 1 * MiB) == AllReduceAlgo::TwoShot);
  CHECK(pick(8, 64 * MiB - 16) == AllReduceAlgo::TwoShot);
  CHECK(pick(8, 64 * MiB) == AllReduceAlgo::CopyEngine);
  CHECK(pick(8, 64 * MiB + 2) == AllReduceAlgo::TwoShot);  // count not a multiple of 8
  CHECK(pick(8, 1 * KiB, false) == AllReduceAlgo::TwoShot);
  // Forced.
  CHECK(pick(8, 64 * MiB, true, AllReduceAlgo::OneShot) == AllReduceAlgo::OneShot);
  CHECK(pick(2, 8, true, AllReduceAlgo::TwoShot) == AllReduceAlgo::TwoShot);
  CHECK(pick(8, 8, true, AllReduceAlgo::LamportTwoShot) == AllReduceAlgo::LamportTwoShot);
  CHECK(pick(4, 1 * KiB, true, AllReduceAlgo::CopyEngine) == AllReduceAlgo::CopyEngine);
  CHECK(pick(4, 6, true, AllReduceAlgo::CopyEngine) == AllReduceAlgo::TwoShot);  // 3 elements
}

TEST_CASE("the one-shot's protocol", "[tuning]") {
  CHECK(oneShotIsLamport(2, 4 * MiB, 0, AllReduceAlgo::Auto));
  CHECK_FALSE(oneShotIsLamport(2, 4 * MiB + 16, 0, AllReduceAlgo::Auto));
  CHECK(oneShotIsLamport(4, 1 * MiB, 0, AllReduceAlgo::Auto));
  CHECK(oneShotIsLamport(8, 256 * KiB, 0, AllReduceAlgo::Auto));
  CHECK_FALSE(oneShotIsLamport(8, 512 * KiB, 0, AllReduceAlgo::Auto));
  CHECK_FALSE(oneShotIsLamport(2, 8, 0, AllReduceAlgo::OneShot));  // the barrier one-shot forced
  CHECK_FALSE(oneShotIsLamport(2, 128 * KiB, 64 * KiB, AllReduceAlgo::Auto));  // FC_LAMPORT_MAX_BYTES
  CHECK(oneShotIsLamport(8, 512 * KiB, 1 * MiB, AllReduceAlgo::Auto));
  // One CTA an SM where a data thread owns 2 packs of 16 bytes or more: at 2 ranks, 128
  // CTAs x 512 data threads, above 1 MiB.
  const size_t threads = 128 * 512;
  CHECK_FALSE(lamportSoloCtas((1 * MiB / 16 + threads - 1) / threads));
  CHECK(lamportSoloCtas((1 * MiB / 16 + 1 + threads - 1) / threads));
  CHECK(lamportSoloCtas((2 * MiB / 16 + threads - 1) / threads));
  CHECK(lamportSoloCtas((4 * MiB / 16 + threads - 1) / threads));
  CHECK_FALSE(lamportSoloCtas(1));
  // Wide CTAs where a CTA owns 5-7 chunks of 128 packs (at 2 ranks, 128 CTAs: 1-1.75 MiB).
  CHECK_FALSE(lamportWideCtas(512, 512, 992));
  CHECK(lamportWideCtas(640, 512, 992));
  CHECK(lamportWideCtas(896, 512, 992));
  CHECK(lamportWideCtas(992, 512, 992));
  CHECK_FALSE(lamportWideCtas(1024, 512, 992));
}

TEST_CASE("the all-reduce + RMSNorm's polls before the back-off", "[tuning]") {
  // Unset FC_LAMPORT_SPINS: 64 rounds back to back up to 128 rows, the default 0 beyond.
  CHECK(normLamportSpins(1, 0, false) == 64);
  CHECK(normLamportSpins(128, 0, false) == 64);
  CHECK(normLamportSpins(129, 0, false) == 0);
  // Given: every call follows it, also 0.
  CHECK(normLamportSpins(1, 0, true) == 0);
  CHECK(normLamportSpins(1, 8, true) == 8);
  CHECK(normLamportSpins(512, 1024, true) == 1024);
}

TEST_CASE("the all-reduce + RMSNorm's CTAs of a row each", "[tuning]") {
  // The rule past 128 rows: 2 ranks, a pack a data thread, every row's CTA resident.
  CHECK(normRowsOwnCtas(512, 256, 2, 128, 512, 528));    // 512 x 2048 in bf16
  CHECK(normRowsOwnCtas(384, 320, 2, 128, 512, 396));    // 384 x 2560
  CHECK(normRowsOwnCtas(256, 512, 2, 128, 512, 264));    // 256 x 4096
  CHECK(!normRowsOwnCtas(320, 512, 2, 128, 512, 264));   // 320 x 4096: not all resident
  CHECK(!normRowsOwnCtas(128, 256, 2, 128, 512, 528));   // within maxCtas: as before
  CHECK(!normRowsOwnCtas(192, 1024, 2, 128, 512, 264));  // 192 x 8192: two packs a thread
  CHECK(!normRowsOwnCtas(192, 256, 4, 128, 512, 528));   // 4 ranks: not measured
  // Unset FC_ARNORM_ROW_CTAS: a CTA a row up to maxCtas, rows in turn beyond.
  CHECK(normRowCtas(1, 128, 0, 264) == 1);
  CHECK(normRowCtas(100, 128, 0, 264) == 100);
  CHECK(normRowCtas(384, 128, 0, 264) == 128);
  // Set: its count, never past what the device holds at once.
  CHECK(normRowCtas(384, 128, 512, 528) == 384);
  CHECK(normRowCtas(512, 128, 512, 264) == 264);
  CHECK(normRowCtas(700, 128, 512, 528) == 512);
  CHECK(normRowCtas(384, 128, 64, 528) == 64);
  // A fewer-SM device: the resident count bounds the default too.
  CHECK(normRowCtas(384, 128, 0, 66) == 66);
  CHECK(normRowCtas(0, 128, 0, 66) == 1);
}

TEST_CASE("fcReduceScatter's and fcAllGather's choices", "[tuning]") {
  const MoveAlgo A = MoveAlgo::Auto;
  CHECK(chooseReduceScatter(1, A, 1 * MiB, 1 * MiB) == MoveAlgo::Sm);
  CHECK(chooseReduceScatter(2, A, 4 * MiB, 8 * MiB) == MoveAlgo::Lamport);
  CHECK(chooseReduceScatter(2, A, 4 * MiB + 16, 8 * MiB + 32) == MoveAlgo::Sm);
  CHECK(chooseReduceScatter(2, A, 16 * MiB, 32 * MiB) == MoveAlgo::CopyEngine);
  CHECK(chooseReduceScatter(4, A, 1 * MiB, 4 * MiB) == MoveAlgo::Lamport);
  CHECK(chooseReduceScatter(4, A, 2 * MiB, 8 * MiB) == MoveAlgo::Sm);
  CHECK(chooseReduceScatter(4, A, 8 * MiB, 32 * MiB) == MoveAlgo::CopyEngine);
  CHECK(chooseReduceScatter(8, A, 1 * KiB, 8 * KiB) == MoveAlgo::Sm);
  CHECK(chooseReduceScatter(8, A, 4 * MiB, 32 * MiB) == MoveAlgo::CopyEngine);
  CHECK(chooseReduceScatter(8, MoveAlgo::Lamport, 1 * MiB, 8 * MiB) == MoveAlgo::Lamport);
  CHECK(chooseReduceScatter(8, MoveAlgo::Lamport, 2 * MiB, 16 * MiB) == MoveAlgo::Sm);
  CHECK(chooseReduceScatter(2, MoveAlgo::CopyEngine, 16, 32) == MoveAlgo::CopyEngine);
  CHECK(chooseReduceScatter(2, MoveAlgo::Sm, 16, 32) == MoveAlgo::Sm);

  for (int W : {2, 4, 8}) {
    CHECK(chooseAllGather(W, A, 64 * MiB - 1) == MoveAlgo::Sm);
    CHECK(chooseAllGather(W, A, 64 * MiB) == MoveAlgo::CopyEngine);
    CHECK(chooseAllGather(W, MoveAlgo::CopyEngine, 16) == MoveAlgo::CopyEngine);
    CHECK(chooseAllGather(W, MoveAlgo::Sm, 256 * MiB) == MoveAlgo::Sm);
  }
  CHECK(chooseAllGather(1, MoveAlgo::CopyEngine, 256 * MiB) == MoveAlgo::Sm);
}

TEST_CASE("fcAllReduceResidualRMSNorm's choice", "[tuning]") {
  CHECK(allReduceNormOneKernelMaxBytes(2) == 4 * MiB);
  CHECK(allReduceNormOneKernelMaxRows(2) == 384);
  CHECK(allReduceNormOneKernelMaxRows(2, 4 * KiB) == 640);      // hidden 2048 in bf16
  CHECK(allReduceNormOneKernelMaxRows(2, 4 * KiB + 16) == 384);
  CHECK(allReduceNormOneKernelMaxRows(4) == SIZE_MAX);
  CHECK(allReduceNormOneKernelMaxBytes(4) == 576 * KiB);
  CHECK(allReduceNormOneKernelMaxBytes(8) == 256 * KiB);
  CHECK(allReduceNormOneKernelAboveBytes(2) == 0);
  CHECK(allReduceNormOneKernelAboveBytes(4) == 256 * KiB);
  CHECK(allReduceNormOneKernelAboveBytes(8) == 256 * KiB);
  CHECK(allReduceNormOneKernelAboveBytes(4, 16 * KiB) == 0);          // rows of half a cluster
  CHECK(allReduceNormOneKernelAboveBytes(4, 16 * KiB - 16) == 256 * KiB);
  CHECK(allReduceNormOneKernelAboveBytes(8, 64 * KiB) == 256 * KiB);  // 8 ranks: unmeasured
  CHECK(allReduceNormTwoShotAuto(2));
  CHECK_FALSE(allReduceNormTwoShotAuto(4));
  // rows 0: rows of 8 KiB (hidden 4096 in bf16), at least one.
  auto pick = [](int W, size_t bytes, NormAlgo forced = NormAlgo::Auto, bool twoShotFits = true,
                 uint64_t maxOverride = 0, size_t rows = 0) {
    NormQuery q;
    q.forced = forced;
    q.nranks = W;
    q.bytes = bytes;
    q.rows = rows ? rows : std::max<size_t>(1, bytes / (8 * KiB));
    q.maxOverride = maxOverride;
    q.twoShotFits = twoShotFits;
    return chooseAllReduceNorm(q);
  };
  // 2 ranks: the one kernel up to 384 rows (640 of 4 KiB) and its 4 MiB slot, the two-shot
  // beyond either.
  auto rows2 = [&](size_t bytes, size_t rows) { return pick(2, bytes, NormAlgo::Auto, true, 0, rows); };
  CHECK(rows2(1 * MiB, 128) == NormPath::OneKernel);
  CHECK(rows2(4 * MiB, 128) == NormPath::OneKernel);
  CHECK(rows2(4 * MiB + 16, 128) == NormPath::TwoShot);
  CHECK(rows2(640 * KiB, 160) == NormPath::OneKernel);
  CHECK(rows2(800 * KiB, 200) == NormPath::OneKernel);
  CHECK(rows2(1536 * KiB, 384) == NormPath::OneKernel);
  CHECK(rows2(3080 * KiB, 385) == NormPath::TwoShot);     // 385 x 4096
  CHECK(rows2(3840 * KiB, 384) == NormPath::OneKernel);   // 384 x 5120 in bf16
  CHECK(rows2(385 * 4 * KiB, 385) == NormPath::OneKernel);  // rows of 4 KiB: to 640
  CHECK(rows2(640 * 4 * KiB, 640) == NormPath::OneKernel);
  CHECK(rows2(641 * 4 * KiB, 641) == NormPath::TwoShot);
  // ... but past 1024 rows of at most 5 KiB: the all-reduce, then the local norm.
  CHECK(rows2(1024 * 4 * KiB, 1024) == NormPath::TwoShot);
  CHECK(rows2(1025 * 4 * KiB, 1025) == NormPath::Unfused);
  CHECK(rows2(8192 * 2 * KiB, 8192) == NormPath::Unfused);   // 8192 x 1024
  CHECK(rows2(1500 * 5 * KiB, 1500) == NormPath::Unfused);   // 1500 x 2560
  CHECK(rows2(2048 * 6 * KiB, 2048) == NormPath::TwoShot);   // 2048 x 3072
  CHECK(rows2(2048 * 8 * KiB, 2048) == NormPath::TwoShot);   // 2048 x 4096
  CHECK(rows2(385 * 5 * KiB, 385) == NormPath::TwoShot);    // 385 x 2560
  CHECK(rows2(4608 * KiB, 384) == NormPath::TwoShot);     // 384 x 6144: beyond the slot
  CHECK(pick(2, 8 * MiB, NormAlgo::Auto, false, 0, 500) == NormPath::Unfused);  // rows beyond half a slot
  // 4 ranks: the all-reduce's one-shot + the norm kernel up to 256 KiB, the one kernel
  // above it to 576 KiB (also where the all-reduce alone is still a one-shot, to 512 KiB),
  // the unfused path (the Lamport two-shot + norm) beyond.
  CHECK(pick(4, 8 * KiB) == NormPath::Unfused);
  CHECK(pick(4, 256 * KiB) == NormPath::Unfused);
  CHECK(pick(4, 256 * KiB + 16) == NormPath::OneKernel);
  CHECK(pick(4, oneShotMaxBytes(4)) == NormPath::OneKernel);
  CHECK(pick(4, 576 * KiB) == NormPath::OneKernel);
  CHECK(pick(4, 576 * KiB + 16) == NormPath::Unfused);
  CHECK(pick(4, 1 * MiB) == NormPath::Unfused);
  // ... but rows of 16 KiB and more take the one kernel from the first byte (to 576 KiB).
  auto rows4 = [&](size_t tokens, size_t rowBytes) {
    return pick(4, tokens * rowBytes, NormAlgo::Auto, true, 0, tokens);
  };
  CHECK(rows4(1, 32 * KiB) == NormPath::OneKernel);   // 1 x 16384 in bf16
  CHECK(rows4(8, 32 * KiB) == NormPath::OneKernel);
  CHECK(rows4(18, 32 * KiB) == NormPath::OneKernel);  // 576 KiB
  CHECK(rows4(19, 32 * KiB) == NormPath::Unfused);    // past it
  CHECK(rows4(8, 16 * KiB) == NormPath::OneKernel);   // 8 x 8192
  CHECK(rows4(36, 16 * KiB) == NormPath::OneKernel);  // 576 KiB
  CHECK(rows4(8, 10 * KiB) == NormPath::Unfused);     // 8 x 5120: the one-shot + the norm kernel
  CHECK(pick(4, 64 * MiB) == NormPath::Unfused);
  // 8 ranks: the one-shot's limit (512 KiB) is above the one kernel's Lamport limit.
  CHECK(pick(8, 256 * KiB) == NormPath::Unfused);
  CHECK(pick(8, 512 * KiB) == NormPath::Unfused);
  CHECK(pick(2, 4 * MiB, NormAlgo::OneKernel) == NormPath::OneKernel);  // "fused": to the push slot
  CHECK(pick(2, 4 * MiB + 16, NormAlgo::OneKernel) == NormPath::TwoShot);
  CHECK(pick(4, 16, NormAlgo::OneKernel) == NormPath::OneKernel);  // forced: from the first byte
  CHECK(pick(4, 1 * MiB + 16, NormAlgo::OneKernel) == NormPath::TwoShot);
  CHECK(pick(2, 16, NormAlgo::Unfused) == NormPath::Unfused);
  // "twoshot": the two-shot kernel from the first byte where it runs (up to 4 ranks, rows
  // within half a push slot), else unfused.
  CHECK(pick(2, 16, NormAlgo::TwoShot) == NormPath::TwoShot);
  CHECK(pick(4, 64 * MiB, NormAlgo::TwoShot) == NormPath::TwoShot);
  CHECK(pick(2, 1 * MiB, NormAlgo::TwoShot, false) == NormPath::Unfused);
  CHECK(pick(8, 16, NormAlgo::TwoShot) == NormPath::Unfused);
  CHECK(pick(2, 128 * KiB, NormAlgo::Auto, true, 64 * KiB) == NormPath::TwoShot);  // FC_LAMPORT_MAX_BYTES
  // 2 ranks: the one kernel at every row length up to its limits (rows of 8-16 KiB on
  // clusters of 2-4 CTAs included: the unfused window they once had is gone, perf-log
  // allReduceNormUnfusedWindow).
  auto bf16 = [&](size_t tokens, size_t hidden, NormAlgo forced = NormAlgo::Auto) {
    NormQuery q;
    q.forced = forced;
    q.nranks = 2;
    q.rows = tokens;
    q.bytes = tokens * hidden * 2;
    q.twoShotFits = true;
    return chooseAllReduceNorm(q);
  };
  CHECK(bf16(1, 5120) == NormPath::OneKernel);
  CHECK(bf16(8, 8192) == NormPath::OneKernel);
  CHECK(bf16(17, 5120) == NormPath::OneKernel);
  CHECK(bf16(3, 6144) == NormPath::OneKernel);
  CHECK(bf16(1, 16384) == NormPath::OneKernel);   // rows of 32 KiB (clusters of 8)
  CHECK(bf16(8, 8192, NormAlgo::Unfused) == NormPath::Unfused);
  CHECK(bf16(384, 4096) == NormPath::OneKernel);
  CHECK(bf16(385, 4096) == NormPath::TwoShot);    // past the one kernel's rows

  // The two-shot kernel's clusters: only where a block's rows leave the grid short.
  CHECK(normTwoShotClusterCtas(128, 1024, 128) == 1);  // 2 ranks, hidden 8192
  CHECK(normTwoShotClusterCtas(64, 2048, 128) == 2);   // 2 ranks, hidden 16384
  CHECK(normTwoShotClusterCtas(16, 2048, 128) == 8);   // 4 ranks, hidden 16384
  CHECK(normTwoShotClusterCtas(32, 1024, 128) == 4);   // 4 ranks, hidden 8192
  CHECK(normTwoShotClusterCtas(51, 640, 128) == 2);    // 4 ranks, hidden 5120
  CHECK(normTwoShotClusterCtas(16, 256, 128) == 2);    // short rows keep 128 packs a CTA
  CHECK(normTwoShotClusterCtas(1, 4096, 128) == 8);
  // Passes aligned to the clusters where a call takes more than one and a CTA then gets
  // fewer rows: 2 ranks, 5120 in bf16 (blocks of up to 204 rows, 128 clusters of one CTA)
  // in blocks of 128 rows.
  CHECK(normTwoShotBlockRows(408, 2, 204, 640, 128) == 204);   // one pass
  CHECK(normTwoShotBlockRows(409, 2, 204, 640, 128) == 128);  // 2 + 1 rows a CTA against 1 + 1
  CHECK(normTwoShotBlockRows(512, 2, 204, 640, 128) == 128);
  CHECK(normTwoShotBlockRows(600, 2, 204, 640, 128) == 204);  // 2 + 1 either way: fewer passes
  CHECK(normTwoShotBlockRows(800, 2, 204, 640, 128) == 204);  // 2 + 2 against 1 + 1 + 1 + 1
  CHECK(normTwoShotBlockRows(1000, 2, 204, 640, 128) == 128); // 2 + 2 + 1 against 4 x 1
  CHECK(normTwoShotBlockRows(1000, 2, 204, 640, 128, false) == 204);
  CHECK(normTwoShotBlockRows(1000, 2, 256, 512, 128) == 256);  // 4096: already whole rounds
  CHECK(normTwoShotBlockRows(1000, 2, 341, 384, 128) == 256);  // 3072
  CHECK(normTwoShotBlockRows(1000, 2, 85, 1536, 128) == 85);   // 12288: a cluster per row
  CHECK(normTwoShotBlockRows(1000, 4, 51, 640, 128) == 51);    // 4 ranks: clusters of 2 CTAs
  CHECK(normTwoShotBlockRows(1000, 2, 200, 640, 64) == 192);   // FC_MAX_CTAS=64
  CHECK(normTwoShotBlockRows(1000, 2, 0, 640, 128) == 0);
  CHECK(normClusterPacks(512, 512, true) == 0);
  CHECK(normClusterPacks(1024, 512, true) == 256);
  // One wide CTA a row at 5120 in bf16 (640 packs), clusters from 6144 (768) and without
  // wide CTAs.
  CHECK(normClusterPacks(640, 512, true) == 0);
  CHECK(normClusterPacks(576, 512, true) == 0);
  CHECK(normClusterPacks(640, 512, false) == 256);
  CHECK(normClusterPacks(768, 512, true) == 256);
  CHECK(normClusterPacks(896, 512, true) == 256);
  // Wide CTAs only where every data thread gets one pack: 5120-7168 in bf16 at one CTA
  // a row, 12288 at two; not 4096 (512 threads hold it), 8192 (1024 > 992), 16384 at two.
  CHECK_FALSE(normWideCtas(512, 512, 992));
  CHECK(normWideCtas(640, 512, 992));
  CHECK(normWideCtas(896, 512, 992));
  CHECK(normWideCtas(768, 512, 992));
  CHECK(normWideCtas(992, 512, 992));
  CHECK_FALSE(normWideCtas(1024, 512, 992));
  CHECK_FALSE(normWideCtas(2048, 512, 992));
  // The local norm's rows per CTA: at most 4 packs of each kind a thread (4 rows of one
  // pack, 2 of two), one row a CTA for longer rows and below 3 MiB of rows.
  CHECK(residualNormRowsPerCta(8192, 512, 1) == 4);   // hidden 4096 in bf16 over 512 threads
  CHECK(residualNormRowsPerCta(8192, 640, 2) == 2);   // 5120-8192
  CHECK(residualNormRowsPerCta(8192, 1536, 3) == 1);  // 12288
  CHECK(residualNormRowsPerCta(8192, 2048, 4) == 1);  // 16384
  CHECK(residualNormRowsPerCta(384, 512, 1) == 4);    // 3 MiB
  CHECK(residualNormRowsPerCta(383, 512, 1) == 1);    // below
  CHECK(residualNormRowsPerCta(768, 256, 1) == 4);    // 3 MiB of rows of 2048
  CHECK(residualNormRowsPerCta(256, 512, 1) == 1);
  CHECK(residualNormRowsPerCta(16, 512, 1, 4) == 4);  // FC_NORM_LOCAL_ROWS=4
  CHECK(residualNormRowsPerCta(16, 640, 2, 4) == 2);  // ... as far as the packs allow
  CHECK(residualNormRowsPerCta(8192, 512, 1, 1) == 1);
  CHECK(residualNormRowsPerCta(8192, 512, 1, 2) == 2);
  CHECK(residualNormRowsPerCta(8192, 0, 0, 4) == 1);
  // The norm behind the decode kernel: its row in registers past 512 packs, one a thread
  // below 1024 threads' worth, two up to twice that; the 512-thread kernel elsewhere.
  CHECK(residualNormRegPacks(512, 1024) == 0);   // hidden 4096 in bf16: 512 threads, one pack each
  CHECK(residualNormRegPacks(513, 1024) == 1);
  CHECK(residualNormRegPacks(640, 1024) == 1);   // 5120
  CHECK(residualNormRegPacks(1023, 1024) == 1);
  CHECK(residualNormRegPacks(1024, 1024) == 2);  // 8192: two packs on 512 threads
  CHECK(residualNormRegPacks(2048, 1024) == 2);  // 16384
  CHECK(residualNormRegPacks(2049, 1024) == 0);  // beyond: the row loop
  CHECK(residualNormRegPacks(1, 1024) == 0);
}

TEST_CASE("fcAllGatherMatmul's choice", "[tuning]") {
  auto pick = [](int W, int sms, size_t M, size_t N, size_t K, FusedAlgo forced = FusedAlgo::Auto,
                 bool engineTakes = true, bool fits = true, int engineSms = 0, bool inPasses = false) {
    AllGatherMatmulQuery q;
    q.forced = forced;
    q.nranks = W;
    q.gpuSms = sms;
    q.engineSms = engineSms ? engineSms : sms;
    q.M = M;
    q.N = N;
    q.K = K;
    q.engineTakes = engineTakes;
    q.pipelineFits = fits;
    q.pipelineInPasses = inPasses;
    return chooseAllGatherMatmul(q);
  };
  for (int sms : {132, 114}) {
    INFO(sms << " SMs");
    // 2 ranks: the engine on the public shapes, the pipeline past N or K of 8192 (N: where B
    // is beyond 128 MiB or shards beyond 2048 rows), unfused for small shards.
    CHECK(pick(2, sms, 8192, 3072, 4096) == FusedAlgo::Engine);
    CHECK(pick(2, sms, 2048, 3584, 5120) == FusedAlgo::Engine);
    CHECK(pick(2, sms, 8192, 27648, 5120) == FusedAlgo::Pipeline);
    CHECK(pick(2, sms, 4096, 6656, 16384) == FusedAlgo::Pipeline);
    CHECK(pick(2, sms, 512, 27648, 5120) == FusedAlgo::Unfused);
    CHECK(pick(2, sms, 512, 3072, 4096) == FusedAlgo::Unfused);
    CHECK(pick(2, sms, 8192, 3072, 4096, FusedAlgo::Auto, false) == FusedAlgo::Unfused);  // no engine: unfused
    // Shards of 512-1023 rows at 2 ranks: the engine where its model is 5 % ahead of the
    // unfused path (narrow tiles in more than one wave), else unfused; the pipeline's N.
    CHECK(pick(2, sms, 1024, 3072, 4096) == FusedAlgo::Engine);
    CHECK(pick(2, sms, 1024, 4096, 4096) == FusedAlgo::Engine);
    CHECK(pick(2, sms, 1536, 3584, 5120) == FusedAlgo::Engine);
    CHECK(pick(2, sms, 1024, 1536, 4096) == FusedAlgo::Unfused);  // one wave at every width
    CHECK(pick(2, sms, 1280, 3072, 4096) == FusedAlgo::Unfused);  // shards of 2.5 clusters
    {
      AllGatherMatmulQuery pulled;  // a symmetric A with Agathered: the model's engine is not taken
      pulled.nranks = 2;
      pulled.gpuSms = pulled.engineSms = sms;
      pulled.M = 1024;
      pulled.N = 3072;
      pulled.K = 4096;
      pulled.engineTakes = pulled.pipelineFits = true;
      pulled.enginePushes = false;
      CHECK(chooseAllGatherMatmul(pulled) == FusedAlgo::Unfused);
      pulled.M = 2048;  // the rule for 1024-row shards holds for every form
      CHECK(chooseAllGatherMatmul(pulled) == FusedAlgo::Engine);
    }
    // Beyond N 8192 at 2 ranks: the engine where B is within 128 MiB and shards within 2048
    // rows (512-row shards by the model, ahead of the pipeline there), else the pipeline.
    CHECK(pick(2, sms, 1024, 14336, 4096) == FusedAlgo::Engine);
    CHECK(pick(2, sms, 3072, 14336, 4096) == FusedAlgo::Engine);
    CHECK(pick(2, sms, 4096, 10240, 4096) == FusedAlgo::Engine);
    CHECK(pick(2, sms, 8192, 14336, 4096) == FusedAlgo::Pipeline);  // shards beyond 2048 rows
    CHECK(pick(2, sms, 2048, 28672, 4096) == FusedAlgo::Pipeline);  // B over 128 MiB
    CHECK(pick(2, sms, 1024, 10240, 8192) == FusedAlgo::Pipeline);  // B over 128 MiB
    CHECK(pick(4, sms, 4096, 14336, 4096) == FusedAlgo::Pipeline);  // 2 ranks only
    CHECK(pick(2, sms, 512, 8192, 4096) == FusedAlgo::Unfused);  // 256-row shards, N within 8192
    CHECK(pick(4, sms, 1024, 14336, 4096) == FusedAlgo::Unfused);  // 2 ranks only
    CHECK(pick(4, sms, 2048, 3072, 4096) == FusedAlgo::Unfused);  // 2 ranks only
    // 3-4 ranks: the engine for shards of 1024 rows, larger ones where the pipeline does
    // not fill its waves; 8 ranks: never.
    CHECK(pick(4, sms, 4096, 1536, 4096) == FusedAlgo::Engine);
    CHECK(pick(4, sms, 4096, 7168, 4096) == FusedAlgo::Engine);
    CHECK(pick(3, sms, 3072, 3072, 4096) == FusedAlgo::Engine);
    CHECK(pick(4, sms, 8192, 3072, 4096) == FusedAlgo::Pipeline);
    CHECK(pick(4, sms, 8192, 7168, 4096) == FusedAlgo::Pipeline);
    CHECK(pick(3, sms, 6144, 3072, 4096) == FusedAlgo::Pipeline);
    CHECK(pick(4, sms, 2048, 7168, 4096) == FusedAlgo::Unfused);  // 512-row shards, < 2 waves
    CHECK(pick(4, sms, 8192, 27648, 5120) == FusedAlgo::Pipeline);
    CHECK(pick(8, sms, 16384, 3072, 4096) == FusedAlgo::Pipeline);
    CHECK(pick(8, sms, 8192, 8192, 4096) == FusedAlgo::Pipeline);
    CHECK(pick(8, sms, 2048, 4096, 4096) == FusedAlgo::Unfused);
    // Forced, and the fall-backs.
    CHECK(pick(4, sms, 512, 512, 512, FusedAlgo::Engine) == FusedAlgo::Engine);
    CHECK(pick(4, sms, 512, 512, 512, FusedAlgo::Engine, false) == FusedAlgo::Pipeline);
    CHECK(pick(4, sms, 512, 512, 512, FusedAlgo::Engine, false, false) == FusedAlgo::Unfused);
    CHECK(pick(2, sms, 8192, 3072, 4096, FusedAlgo::Pipeline) == FusedAlgo::Pipeline);
    CHECK(pick(2, sms, 8192, 3072, 4096, FusedAlgo::Pipeline, true, false) == FusedAlgo::Unfused);
    CHECK(pick(2, sms, 8192, 3072, 4096, FusedAlgo::Unfused) == FusedAlgo::Unfused);
    // Shards beyond a workspace slot (the engine cannot stage them): the pipeline in passes
    // of rows where auto would run the engine or the pipeline, unfused where neither fills
    // its waves or the pipeline cannot run in passes either.
    auto passes = [&](int W, size_t M, size_t N, size_t K, FusedAlgo forced = FusedAlgo::Auto, bool inPasses = true) {
      return pick(W, sms, M, N, K, forced, false, false, 0, inPasses);
    };
    CHECK(passes(2, 32768, 3072, 4096) == FusedAlgo::Pipeline);    // the engine's shape
    CHECK(passes(2, 32768, 27648, 5120) == FusedAlgo::Pipeline);   // the pipeline's
    CHECK(passes(4, 32768, 3072, 8192) == FusedAlgo::Pipeline);
    CHECK(passes(2, 512, 3072, 4096) == FusedAlgo::Unfused);       // 256-row shards
    CHECK(passes(2, 32768, 3072, 4096, FusedAlgo::Auto, false) == FusedAlgo::Unfused);
    CHECK(passes(2, 512, 512, 512, FusedAlgo::Engine) == FusedAlgo::Pipeline);
    CHECK(passes(2, 512, 512, 512, FusedAlgo::Pipeline) == FusedAlgo::Pipeline);
    CHECK(passes(2, 512, 512, 512, FusedAlgo::Pipeline, false) == FusedAlgo::Unfused);
    CHECK(passes(2, 32768, 3072, 4096, FusedAlgo::Unfused) == FusedAlgo::Unfused);
  }
  // Where the SM count decides: a wave of 128 x 256 tiles for the engine (128 tiles),
  // two waves of 128 x 128 tiles per shard for the pipeline (240 and 256 tiles).
  // 256-row shards beyond N 8192 at 2 ranks: the engine where its tiles fill 95 % of their
  // last wave (132 SMs: 256 tiles), else unfused.
  CHECK(pick(2, 132, 512, 14336, 4096) == FusedAlgo::Engine);   // 4 x 64 tiles of 128 x 224
  CHECK(pick(2, 132, 512, 12288, 4096) == FusedAlgo::Engine);   // 4 x 64 of 128 x 192
  CHECK(pick(2, 132, 512, 10240, 5120) == FusedAlgo::Engine);   // 4 x 64 of 128 x 160
  CHECK(pick(2, 132, 512, 9216, 4096) == FusedAlgo::Unfused);   // 4 x 58: 88 % of 2 waves
  CHECK(pick(2, 132, 512, 13312, 4096) == FusedAlgo::Unfused);  // 4 x 60: 91 %
  CHECK(pick(2, 132, 512, 27648, 5120) == FusedAlgo::Unfused);  // B over 128 MiB
  CHECK(pick(2, 132, 2048, 1920, 4096) == FusedAlgo::Unfused);
  CHECK(pick(2, 114, 2048, 1920, 4096) == FusedAlgo::Engine);
  CHECK(pick(2, 132, 2048, 1920, 4096, FusedAlgo::Auto, true, true, 64) == FusedAlgo::Engine);  // FC_ENGINE_SMS
  CHECK(pick(4, 132, 8192, 1920, 4096) == FusedAlgo::Engine);    // 240 pipeline tiles < 264
  CHECK(pick(4, 114, 8192, 1920, 4096) == FusedAlgo::Pipeline);  // >= 228
  CHECK(pick(4, 132, 2048, 1920, 4096) == FusedAlgo::Unfused);  // 512-row shards
  CHECK(pick(4, 114, 2048, 1920, 4096) == FusedAlgo::Unfused);
  CHECK(pick(8, 132, 8192, 4096, 4096) == FusedAlgo::Unfused);
  CHECK(pick(8, 114, 8192, 4096, 4096) == FusedAlgo::Pipeline);

  // The unfused path's all-gather.
  CHECK(allGatherMatmulGather(2, 1 * MiB, false) == MoveAlgo::Lamport);
  CHECK(allGatherMatmulGather(4, 1 * MiB, false) == MoveAlgo::Lamport);
  CHECK(allGatherMatmulGather(2, 1 * MiB, true) == MoveAlgo::Sm);  // a caller's Agathered
  CHECK(allGatherMatmulGather(4, 1 * MiB + 16, false) == MoveAlgo::Sm);
  CHECK(allGatherMatmulGather(8, 1 * KiB, false) == MoveAlgo::Sm);
  CHECK(allGatherMatmulGather(2, 32 * MiB, false) == MoveAlgo::CopyEngine);
  CHECK(allGatherMatmulGather(8, 8 * MiB, true) == MoveAlgo::CopyEngine);

  // The pipeline's cost model.
  using Catch::Matchers::WithinRel;
  CHECK_THAT(pipelinePullSeconds(size_t(350e6)), WithinRel(1e-3 + 8e-6, 1e-12));
  CHECK_THAT(pipelineGemmSeconds(1024, 1024, 1024), WithinRel(2.0 * 1024 * 1024 * 1024 / 600e12 + 5e-6, 1e-12));
}

TEST_CASE("fcMatmulReduceScatter's choice", "[tuning]") {
  struct Shape {
    size_t M, N, K, chunkRows;
  };
  auto pick = [](int W, int sms, Shape s, FusedAlgo forced = FusedAlgo::Auto, bool engineFits = true,
                 bool epilogueAdd = true, bool lamportFits = false, size_t partialBytes = 0) {
    MatmulReduceScatterQuery q;
    q.forced = forced;
    q.nranks = W;
    q.gpuSms = sms;
    q.M = s.M;
    q.N = s.N;
    q.K = s.K;
    q.chunkRows = s.chunkRows;
    q.partialBytes = partialBytes ? partialBytes : s.M * s.N * 2;
    q.workspaceBytes = 130 * MiB;
    q.engineFits = engineFits;
    q.epilogueAdd = epilogueAdd;
    q.lamportFits = lamportFits;
    return chooseMatmulReduceScatter(q);
  };
  for (int sms : {132, 114}) {
    INFO(sms << " SMs");
    // 2 ranks: the engine (with its epilogue add) at >= 1024-row blocks, K <= 2048 or a
    // product of 3.75 waves of 128 x 128 tiles.
    CHECK(pick(2, sms, {2048, 4096, 2048, 1024}) == MmrsPath::Engine);
    CHECK(pick(2, sms, {8192, 4096, 2048, 4096}) == MmrsPath::Engine);
    CHECK(pick(2, sms, {2048, 4096, 2048, 1024}, FusedAlgo::Auto, true, false) == MmrsPath::Pipeline);
    CHECK(pick(2, sms, {2048, 5120, 2560, 1024}) == MmrsPath::Engine);
    CHECK(pick(2, sms, {8192, 4096, 7168, 4096}) == MmrsPath::Engine);
    // The GPU suite's shapes that take the interleave (tests/gpu/test_fused.cc), at the
    // tests' 8 MiB workspace.
    CHECK(pick(2, sms, {4096, 1024, 1032, 1024}, FusedAlgo::Auto, true, true, false, 8 * MiB) == MmrsPath::Engine);
    CHECK(pick(2, sms, {8192, 512, 136, 2048}, FusedAlgo::Auto, true, true, false, 8 * MiB) == MmrsPath::Engine);
    CHECK(pick(2, sms, {1024, 4096, 7168, 512}) != MmrsPath::Engine);  // 512-row blocks
    // Small products: Lamport where it fits, else the scatter path below 32 MiB of
    // partials, else staged.
    CHECK(pick(2, sms, {512, 4096, 7168, 256}, FusedAlgo::Auto, true, true, true) == MmrsPath::Lamport);
    CHECK(pick(2, sms, {512, 4096, 7168, 256}) == MmrsPath::Scatter);
    CHECK(pick(4, sms, {512, 4096, 7168, 128}, FusedAlgo::Auto, false, false, false, 32 * MiB) == MmrsPath::Scatter);
    CHECK(pick(4, sms, {512, 4096, 7168, 128}, FusedAlgo::Auto, false, false, false, 32 * MiB + 2) ==
          MmrsPath::Staged);
    // 4 and 8 ranks: no engine by default.
    CHECK(pick(4, sms, {8192, 4096, 2048, 2048}) == MmrsPath::Pipeline);
    CHECK(pick(8, sms, {8192, 4096, 2048, 1024}) == MmrsPath::Pipeline);
    CHECK(pick(8, sms, {2048, 4096, 2048, 256}) == MmrsPath::Scatter);
    // Forced.
    CHECK(pick(4, sms, {512, 512, 512, 64}, FusedAlgo::Engine) == MmrsPath::Engine);
    CHECK(pick(4, sms, {512, 512, 512, 64}, FusedAlgo::Engine, false) == MmrsPath::Pipeline);
    CHECK(pick(4, sms, {512, 512, 512, 0}, FusedAlgo::Engine, false) == MmrsPath::Scatter);
    CHECK(pick(2, sms, {2048, 4096, 2048, 0}, FusedAlgo::Pipeline, true, true, true) == MmrsPath::Lamport);
    CHECK(pick(2, sms, {2048, 4096, 2048, 1024}, FusedAlgo::Unfused) == MmrsPath::Scatter);
  }
  // fcMatmulAllReduce (either form): the engine (gathering in its epilogue) at every K
  // from 1024 rows per rank where the product fills 2 waves; fcMatmulReduceScatter's beyond
  // K 2048 from 3.75 waves.
  auto gathering = [](Shape s, bool allReduce = true) {
    MatmulReduceScatterQuery q;
    q.nranks = 2;
    q.gpuSms = 132;
    q.M = s.M, q.N = s.N, q.K = s.K;
    q.chunkRows = s.chunkRows;
    q.partialBytes = s.M * s.N * 2;
    q.workspaceBytes = 130 * MiB;
    q.engineFits = q.epilogueAdd = true;
    q.allReduce = allReduce;
    return chooseMatmulReduceScatter(q);
  };
  for (Shape s : {Shape{2048, 5120, 2560, 1024}, Shape{8192, 5120, 2560, 2048}, Shape{2048, 4096, 2568, 1024},
                  Shape{2048, 4096, 7168, 1024}, Shape{2048, 4096, 14336, 1024}, Shape{4096, 4096, 7168, 2048},
                  Shape{2048, 8192, 3584, 1024}, Shape{2048, 5120, 13824, 1024}, Shape{8192, 5120, 13824, 2048}}) {
    INFO(s.M << " x " << s.N << " x " << s.K);
    CHECK(gathering(s) == MmrsPath::Engine);
    // fcMatmulReduceScatter: K beyond 2048 where the product fills 3.75 waves (495 tiles).
    const size_t tileCount = (s.M / 128) * ((s.N + 127) / 128);
    CHECK(gathering(s, false) == (tileCount >= 495 ? MmrsPath::Engine : MmrsPath::Pipeline));
  }
  CHECK(gathering({2048, 3968, 7168, 1024}, false) == MmrsPath::Engine);    // 496 tiles: 3.76 waves
  CHECK(gathering({2048, 3840, 7168, 1024}, false) == MmrsPath::Pipeline);  // 480 tiles: 3.64 waves
  CHECK(gathering({1024, 4096, 7168, 512}) != MmrsPath::Engine);  // 512 rows per rank
  // Beyond K 2048 only where the product fills 2 waves of 128 x 128 tiles (264 on 132 SMs).
  CHECK(gathering({2048, 2176, 7168, 1024}) == MmrsPath::Engine);   // 272 tiles: 2.06 waves
  CHECK(gathering({2048, 2048, 7168, 1024}) != MmrsPath::Engine);   // 256 tiles: 1.94 waves
  CHECK(gathering({2048, 1024, 8192, 1024}) != MmrsPath::Engine);   // 128 tiles
  CHECK(gathering({2048, 1024, 2048, 1024}) == MmrsPath::Engine);   // K 2048: no wave limit
  CHECK(gathering({2048, 4096, 2048, 1024}, false) == MmrsPath::Engine);
  // Where the SM count decides: 1.25 waves of 128 x 128 tiles per chunk (144 tiles).
  CHECK(pick(2, 132, {2048, 2304, 4096, 1024}) == MmrsPath::Scatter);
  CHECK(pick(2, 114, {2048, 2304, 4096, 1024}) == MmrsPath::Pipeline);
  CHECK(pick(2, 132, {2048, 2560, 7168, 1024}) == MmrsPath::Scatter);  // 160 tiles: level, measured
  CHECK(pick(2, 132, {2048, 3072, 7168, 1024}) == MmrsPath::Pipeline);  // 192 tiles

  CHECK(matmulReduceScatterStagedMove(2, 32 * MiB - 2) == MoveAlgo::Sm);
  CHECK(matmulReduceScatterStagedMove(8, 32 * MiB) == MoveAlgo::CopyEngine);
  CHECK(matmulReduceScatterEnginePieces(1 * MiB, 4) == 1);
  CHECK(matmulReduceScatterEnginePieces(3 * MiB, 4) == 1);
  CHECK(matmulReduceScatterEnginePieces(5 * MiB, 8) == 2);
  CHECK(matmulReduceScatterEnginePieces(8 * MiB, 4) == 4);
  CHECK(matmulReduceScatterEnginePieces(32 * MiB, 4) == 4);
  CHECK(matmulReduceScatterEnginePieces(32 * MiB, 8) == 8);
}

TEST_CASE("fcMatmulReduceScatter's engine: the interleaved order where K is short", "[tuning]") {
  auto il = [](int64_t blockRows, size_t K) { return matmulReduceScatterInterleave(blockRows, K, 256); };
  // 8 pieces of whole 256-row cluster rows, lead 2, from blocks of 8 cluster rows, to K 2048.
  CHECK(il(4096, 2048).pieceRows == 512);
  CHECK(il(4096, 2048).lead == 2);
  CHECK(il(2048, 1536).pieceRows == 256);
  CHECK(il(8192, 2048).pieceRows == 1024);
  CHECK(il(8192, 2049).lead == 0);  // beyond K 2048: the plain order
  CHECK(il(1024, 2048).lead == 0);  // 4 cluster rows
  CHECK(il(4096 + 128, 2048).lead == 0);  // not whole cluster rows: the scheduler would not interleave
  // Rows that are not a power of two: 12 cluster rows in 6 pieces of 2, 20 in 7 of 3.
  CHECK(il(3072, 2048).pieceRows == 512);
  CHECK(il(3072, 2048).lead == 2);
  CHECK(il(5120, 2048).pieceRows == 768);
  CHECK(il(5120, 2048).lead == 2);
  // K <= 1024: 16 pieces, lead 4, where the block has 16 cluster rows; else one row each.
  CHECK(il(4096, 1024).pieceRows == 256);
  CHECK(il(4096, 1024).lead == 4);
  CHECK(il(2048, 1024).pieceRows == 256);
  CHECK(il(2048, 1024).lead == 2);
  CHECK(il(16384, 512).pieceRows == 1024);
  // Never more pieces than the tile counters hold.
  for (int64_t rows = 2048; rows <= 65536; rows += 256)
    for (size_t K : {64, 1024, 2048}) {
      const MmrsInterleave m = il(rows, K);
      CHECK((rows + m.pieceRows - 1) / m.pieceRows <= 16);
      CHECK(m.lead >= 2);
    }
}

TEST_CASE("the GEMM engine's tile shape", "[tuning]") {
  // 132 SMs: the measured cases.
  CHECK(engineSmallTiles(512, 3072, 4096, 132));
  CHECK(engineSmallTiles(512, 27648, 5120, 132));
  CHECK_FALSE(engineSmallTiles(512, 14336, 4096, 132));  // a tie in waves
  CHECK_FALSE(engineSmallTiles(8192, 3072, 4096, 132));
  CHECK(engineSmallTiles(2048, 27648, 5120, 132));  // B over 128 MiB
  CHECK_FALSE(engineSmallTiles(8192, 7168, 8192, 132));  // B 112 MiB
  // Where the SM count decides.
  CHECK_FALSE(engineSmallTiles(1024, 4096, 4096, 132));
  CHECK(engineSmallTiles(1024, 4096, 4096, 114));
  // The all-gather engine's width: the fewest columns per SM, weighted by each tile's
  // cost per column.
  CHECK(engineTileN(512, 3072, 4096, 132) == 96);    // 128 tiles of 128 x 96: one wave
  CHECK(engineTileN(256, 6144, 4096, 132) == 96);
  CHECK(engineTileN(1536, 3072, 4096, 132) == 160);  // 2 waves of 160 columns, not 3 of 96 or 128
  CHECK(engineTileN(512, 3584, 5120, 132) == 128);   // 128 x 96 would need two waves
  CHECK(engineTileN(512, 3072, 4096, 114) == 128);   // 128 tiles of 128 x 96 overflow 114 SMs
  CHECK(engineTileN(1024, 3072, 4096, 132) == 192);  // 128 tiles of 128 x 192: one wave
  CHECK(engineTileN(512, 14336, 4096, 132) == 224);  // 256 tiles of 128 x 224: 2 waves at 97 %
  CHECK(engineTileN(1024, 3584, 5120, 132) == 224);  // 128 tiles of 128 x 224: one wave
  CHECK(engineTileN(2048, 3584, 5120, 132) == 224);
  CHECK(engineTileN(1024, 5120, 5120, 132) == 160);  // 256 tiles of 128 x 160: 2 waves at 97 %
  CHECK(engineTileN(2048, 2560, 5120, 132) == 160);
  CHECK(engineTileN(8192, 14336, 4096, 132) == 256);  // many waves: the widest
  CHECK(engineTileN(512, 27648, 5120, 132) == 128);  // B over 128 MiB: ping-pong only
  CHECK(engineTileN(8192, 3072, 4096, 132) == 256);  // many waves: a tie stays with the wider
  CHECK(engineTileN(2048, 4096, 2048, 132) == 256);
  CHECK(engineTileN(512, 4096, 4096, 132) == 128);   // 128 tiles of 128 x 128 fill a wave already
  // The bands: only where B is beyond 64 MiB, none wider than a shard, than 24 MiB of A's
  // rows, or than the grid takes without padding it by more than 3 %.
  CHECK(engineBands(8192, 3584, 5120, 8192, 256) == 1);   // B 35 MiB
  CHECK(engineBands(8192, 14336, 4096, 8192, 256) == 8);  // 32 cluster rows, 56 tiles
  CHECK(engineBands(8192, 14336, 4096, 1024, 256) == 4);  // a shard of 4 cluster rows
  CHECK(engineBands(8192, 14336, 16384, 8192, 256) == 2);  // a band of 4 would be 32 MiB of A
  CHECK(engineBands(3072, 14336, 4096, 3072, 256) == 4);  // 12 cluster rows: not 8
  CHECK(engineBands(1536, 14336, 4096, 1536, 256) == 2);  // 6: not 4
  CHECK(engineBands(768, 8192, 8192, 768, 192) == 1);     // 3: not 2
  CHECK(engineBands(8192, 14336, 4096, 8192, 192) == 4);  // 75 tiles: 76 (1.3 %), not 80
  CHECK(engineBands(8192, 14336, 4096, 8192, 0) == 1);
  CHECK(engineBands(8192, 14336, 4096, 8192, 128, 512) == 4);  // clusters of 512 rows: 8 would be 32 MiB of A
  // fcAllGatherMatmul's engine, its pulls in the model. The model against the 17 timings it
  // was fitted to (fc-bench agmmstages, 2 H200s, forty-second session: the engine path at 2
  // ranks on each width forced, us).
  struct Timed {
    size_t M, N, K;
    int width;
    double us;
  };
  for (const Timed& t : {Timed{512, 3072, 4096, 96, 39.0}, {512, 3072, 4096, 128, 43.7}, {512, 3072, 4096, 256, 61.5},
                         {1024, 3072, 4096, 192, 62.3}, {1024, 3072, 4096, 128, 51.8}, {1024, 3072, 4096, 256, 68.8},
                         {2048, 3072, 4096, 192, 75.0}, {2048, 3072, 4096, 128, 85.2}, {2048, 3072, 4096, 256, 88.8},
                         {512, 3584, 5120, 128, 52.4}, {512, 3584, 5120, 256, 74.9}, {768, 3584, 5120, 192, 68.9},
                         {768, 3584, 5120, 128, 60.1}, {768, 3584, 5120, 256, 77.9}, {1536, 3072, 4096, 96, 72.4},
                         {1536, 3072, 4096, 128, 78.8}, {1536, 3072, 4096, 256, 87.6}}) {
    INFO(t.M << " x " << t.N << " x " << t.K << " on " << t.width);
    CHECK(std::abs(allGatherEngineSeconds(t.M, t.N, t.K, 2, 132, t.width) * 1e6 - t.us) <= 4.5);
  }
  CHECK(allGatherEngineSeconds(1024, 3072, 4096, 2, 132, 100) == 0);  // no such width
  // Its width: not one wave of 128 x 192 at 1024 x 3072 (every peer tile would wait for the
  // whole pull), 128 x 96 in two; where the pulls hide, engineTileN's.
  CHECK(allGatherEngineTileN(1024, 3072, 4096, 2, 132) == 96);
  CHECK(allGatherEngineTileN(1024, 4096, 4096, 2, 132) == 128);
  CHECK(allGatherEngineTileN(2048, 3072, 4096, 2, 132) == 192);
  CHECK(allGatherEngineTileN(8192, 3072, 4096, 2, 132) == 256);
  CHECK(allGatherEngineTileN(2048, 27648, 5120, 2, 132) == 128);  // B over 128 MiB: ping-pong only
  // The GPU suite's shapes for the widths with a factor 7 and 5 (test_fused.cc): on an
  // H200's or H100's 132 SMs, and on half of them (FC_ENGINE_SMS=66).
  for (int sms : {132, 66}) {
    CHECK(allGatherEngineTileN(2048, 3576, 264, 2, sms) == 224);
    CHECK(allGatherEngineTileN(2048, 5112, 200, 2, sms) == 160);
  }
  for (size_t M : {256, 512, 1024, 1536, 2048, 8192})
    for (size_t N : {3072, 4096, 7168, 14336})
      for (int sms : {132, 114}) {
        INFO(M << " x " << N << " on " << sms << " SMs");
        CHECK(allGatherEngineTileN(M, N, 4096, 1, sms) == engineTileN(M, N, 4096, sms));  // nothing pulled
      }
  using Catch::Matchers::WithinRel;
  // The busiest CTA found among the shard boundaries' steps (tuning.cc) is the one a
  // CTA-by-CTA walk of the static schedule finds: at 1-8 ranks, SM counts beyond and below the
  // tile count, shards not whole tile rows.
  auto walked = [](size_t M, size_t N, size_t K, int ranks, int sms, int width, double cost) {
    const size_t shard = M / size_t(ranks), cols = (N + size_t(width) - 1) / size_t(width);
    const size_t total = (M + 127) / 128 * cols, grid = std::min(size_t(sms), total);
    double most = 0;
    for (size_t c = 0; c < grid; ++c) {
      double t = 0;
      for (size_t k = c; k < total; k += grid) {
        const size_t lastRow = std::min(M, (k / cols + 1) * 128) - 1;
        const size_t s = std::min(lastRow / shard, size_t(ranks) - 1);
        const double landed = s == 0 ? 0 : 8e-6 + double(s * shard * K * 2) / 350e9;
        t = std::max(t, landed) + 2.0 * 128 * width * double(K) * cost / 6e12;
      }
      most = std::max(most, t);
    }
    return most + 7e-6;
  };
  for (size_t M : {512, 640, 1024, 1536, 3072, 8192})
    for (int ranks : {1, 2, 3, 4, 8})
      for (int sms : {132, 16}) {
        INFO(M << " x 3584 x 5120 at " << ranks << " ranks on " << sms << " SMs");
        CHECK_THAT(allGatherEngineSeconds(M, 3584, 5120, ranks, sms, 96),
                   WithinRel(walked(M, 3584, 5120, ranks, sms, 96, 1.15), 1e-9));
        CHECK_THAT(allGatherEngineSeconds(M, 3584, 5120, ranks, sms, 192),
                   WithinRel(walked(M, 3584, 5120, ranks, sms, 192, 1.0), 1e-9));
      }
  // The unfused path: the pull of the peer's shard, then the GEMM alone.
  CHECK(std::abs(allGatherUnfusedSeconds(1024, 3072, 4096, 2, 132) * 1e6 - 57.5) <= 3.5);
  CHECK(std::abs(allGatherUnfusedSeconds(2048, 3072, 4096, 2, 132) * 1e6 - 104.2) <= 3.5);
  // Between 128 and 256 as engineSmallTiles.
  for (size_t M : {512, 1024, 2048, 8192})
    for (size_t N : {4096, 7168, 8192})
      if (const int w = engineTileN(M, N, 4096, 132); w == 128 || w == 256)
        CHECK((w == 128) == engineSmallTiles(M, N, 4096, 132));
  // The reduce-scatter engine also where K <= 2048.
  CHECK_FALSE(scatterEngineSmallTiles(8192, 4096, 4096, 130));
  CHECK(scatterEngineSmallTiles(8192, 4096, 2048, 130));
  CHECK(scatterEngineSmallTiles(1024, 4096, 4096, 112));
  // fcMatmulAllReduce's gathering engine: 128 x 128 at every K.
  CHECK(scatterEngineSmallTiles(8192, 4096, 4096, 130, true));
  CHECK(scatterEngineSmallTiles(4096, 5120, 2560, 132, true));
  CHECK_FALSE(scatterEngineSmallTiles(4096, 5120, 2560, 132));
}

TEST_CASE("the decode GEMM's tiles", "[tuning]") {
  // 132 SMs, the measured layers (tools/probes/decode-gemm): long K, 1-48 rows.
  CHECK(decodeGemmTokens(1, 4096, 7168, 132) == 16);
  CHECK(decodeGemmTokens(32, 4096, 7168, 132) == 16);  // 64 x 2 tiles
  CHECK(decodeGemmTokens(48, 4096, 7168, 132) == 32);  // 64 x 3 tiles of 16 would not fit a wave
  CHECK(decodeGemmTokens(16, 5120, 13824, 132) == 16);
  CHECK(decodeGemmTokens(32, 5120, 13824, 132) == 32);  // 80 x 2 tiles of 16 would not
  CHECK(decodeGemmTokens(48, 5120, 13824, 132) == 0);   // 80 x 2 tiles of 32 do not either
  CHECK(decodeGemmTokens(64, 4096, 7168, 132) == 0);    // level with cuBLASLt from 64 rows
  // K up to N: cuBLASLt.
  CHECK(decodeGemmTokens(16, 4096, 2048, 132) == 0);
  CHECK(decodeGemmTokens(16, 8192, 3584, 132) == 0);
  CHECK(decodeGemmTokens(16, 4096, 6144, 132) == 16);  // K 1.5 N
  CHECK(decodeGemmTokens(16, 4096, 6136, 132) == 0);
  // Fewer SMs: the same wave rule.
  CHECK(decodeGemmTokens(16, 4096, 7168, 64) == 16);
  CHECK(decodeGemmTokens(16, 4096, 7168, 63) == 0);
  CHECK(decodeGemmTokens(0, 4096, 7168, 132) == 0);
  CHECK(decodeGemmTokens(16, 4096, 7168, 0) == 0);
  // The decode engine's GEMM to 48 rows: one wave at any K.
  CHECK(decodeEngineTokens(16, 4096, 132) == 16);
  CHECK(decodeEngineTokens(48, 4096, 132) == 32);
  CHECK(decodeEngineTokens(48, 5120, 132) == 64);   // 80 x 3 / 80 x 2 tiles of 16 / 32 would not fit
  // Above: the fewest padded rows, then the fewest waves, then the narrowest (at the
  // measured cells, 64-256 x 4096 / 5120 / 8192, the fastest of the four tiles or within
  // 0.01x of it).
  CHECK(decodeEngineTokens(64, 4096, 132) == 32);   // 64 x 2 tiles: one wave, as 64 x 1 of 64
  CHECK(decodeEngineTokens(64, 5120, 132) == 64);   // 80 tiles, where 32 takes two waves
  CHECK(decodeEngineTokens(96, 4096, 132) == 32);   // 96 rows exactly, two waves (64: 128 rows)
  CHECK(decodeEngineTokens(96, 8192, 132) == 32);   // three waves, still no padding
  CHECK(decodeEngineTokens(128, 4096, 132) == 64);  // one wave, as 128
  CHECK(decodeEngineTokens(128, 5120, 132) == 128);  // 80 tiles
  CHECK(decodeEngineTokens(192, 4096, 132) == 64);  // 192 tiles, where 128 pads 64 rows
  CHECK(decodeEngineTokens(192, 8192, 132) == 64);  // 384 tiles: three waves
  CHECK(decodeEngineTokens(256, 4096, 132) == 128);
  CHECK(decodeEngineTokens(256, 5120, 132) == 128);  // 160 tiles: two waves
  CHECK(decodeEngineTokens(200, 4096, 132) == 128);  // 256 rows on 64 (two waves) or 128 (one); 32 pads
                                                     // fewer (224) but in four waves
  CHECK(decodeEngineTokens(256, 16384, 132) == 0);   // 512 tiles of 128 at the least: four waves
  CHECK(decodeEngineTokens(257, 2048, 132) == 0);    // past 256 rows
  CHECK(decodeEngineTokens(100, 4096, 0) == 0);
  CHECK(decodeEngineTokens(1, 8192, 132) == 16);   // 128 tiles
  CHECK(decodeEngineTokens(1, 8512, 132) == 0);    // 133 tiles
  CHECK(decodeEngineTokens(8, 4096, 0) == 0);
  CHECK(decodeEngineTokens(0, 4096, 132) == 0);
}

TEST_CASE("engine piece defaults", "[tuning]") {
  CHECK(kAgmmEnginePieces == 1);
  CHECK(kMmrsEnginePieces == 4);
}

TEST_CASE("the one decode kernel's streams of the weight", "[tuning]") {
  // The kernel's shapes (gemv_all_reduce.cu): a warp's stage is 5 KiB in the MMA form at up
  // to 8 rows (B's 4 parts and A's rows, two groups of K), 4.5 KiB in the FMA form at one row.
  // warpBatches: a warp's batches of B (64 k each in the MMA form) for a tile, K / 64 / S
  // with S warps a tile (8 where every CTA has one tile, 4 where some have two).
  const auto query = [](bool mma, size_t K, size_t tiles, size_t busyWarps, size_t warpBatches = 0) {
    GemvStreamQuery q;
    q.mma = mma;
    q.K = K;
    q.tiles = tiles;
    q.grid = std::min<size_t>(tiles, 128);
    q.busyWarps = busyWarps;
    q.warpBatches = warpBatches;
    q.warpStageBytes = mma ? 5120 : 4608;
    q.fitStages = 6;
    return q;
  };
  // 2 x 4096 x 7168: 128 tiles on 128 CTAs, 8 warps a tile: 2 stages (80 KiB in flight),
  // rotated, B's rows copied whole.
  GemvStream c = chooseGemvStream(query(true, 7168, 128, 8, 14));
  CHECK(c.stages == 2);
  CHECK(c.rotate);
  CHECK(c.rowCopies);
  // x 5120 x 13824: 160 tiles on 128 CTAs (32 with two): no row copies.
  c = chooseGemvStream(query(true, 13824, 160, 8, 54));
  CHECK(c.stages == 2);
  CHECK(c.rotate);
  CHECK_FALSE(c.rowCopies);
  // x 8192 x 7168: 256 tiles, two a CTA: row copies.
  CHECK(chooseGemvStream(query(true, 7168, 256, 8, 28)).rowCopies);
  // x 5120 x 2560: 10 batches a warp: rings, neither the rotation nor row copies (K < 3072).
  c = chooseGemvStream(query(true, 2560, 160, 8, 10));
  CHECK(c.stages == 2);
  CHECK_FALSE(c.rotate);
  CHECK_FALSE(c.rowCopies);
  // x 4096 x 2048 (4 batches a warp), x 4096 x 3584 (7): the shallowest rings (2 deep) below
  // 8 batches, whatever the bytes in flight; 8 take rings by bytes in flight.
  CHECK(chooseGemvStream(query(true, 2048, 128, 8, 4)).stages == 2);
  CHECK(chooseGemvStream(query(true, 3584, 128, 8, 7)).stages == 2);
  CHECK(chooseGemvStream(query(true, 2048, 128, 4, 4)).stages == 2);  // by bytes it would be 4
  CHECK(chooseGemvStream(query(true, 2048, 256, 4, 8)).stages == 4);
  CHECK(chooseGemvStream(query(true, 2048, 160, 8, 8)).stages == 2);
  // The FMA form: 2 stages below K 4096 (by bytes: 3); from it 3 stages for 8 busy warps,
  // 4 for 5.
  CHECK(chooseGemvStream(query(false, 2048, 512, 8)).stages == 2);
  CHECK(chooseGemvStream(query(false, 3584, 512, 5)).stages == 2);
  c = chooseGemvStream(query(false, 7168, 512, 8));
  CHECK(c.stages == 3);
  CHECK_FALSE(c.rotate);
  CHECK_FALSE(c.rowCopies);
  CHECK(chooseGemvStream(query(false, 13824, 640, 5)).stages == 4);
  // Each form's first batch into L2 before the PDL wait, with or without rings; forced
  // (FC_GEMV_PREFETCH) wins.
  CHECK(chooseGemvStream(query(false, 2048, 512, 8)).prefetch == 1);
  CHECK(chooseGemvStream(query(false, 13824, 640, 5)).prefetch == 1);
  CHECK(chooseGemvStream(query(true, 7168, 128, 8, 14)).prefetch == 1);
  CHECK(chooseGemvStream(query(true, 2048, 128, 8, 4)).prefetch == 1);
  GemvStreamQuery pq = query(true, 2048, 128, 8, 4);
  pq.prefetch = 2;
  pq.stages = 0;
  CHECK(chooseGemvStream(pq).prefetch == 2);
  pq = query(false, 7168, 512, 8);
  pq.prefetch = 0;
  CHECK(chooseGemvStream(pq).prefetch == 0);
  // Forced values win (FC_GEMV_STAGES / _ROTATE / _ROW_COPIES), within what fits; fewer
  // than 2 stages is none, and without rings neither option.
  GemvStreamQuery q = query(false, 2048, 512, 8);
  q.stages = 4;
  q.rotate = 1;
  q.rowCopies = 1;
  c = chooseGemvStream(q);
  CHECK(c.stages == 4);
  CHECK(c.rotate);
  CHECK_FALSE(c.rowCopies);  // the MMA form's only
  q.fitStages = 1;
  c = chooseGemvStream(q);
  CHECK(c.stages == 0);
  CHECK_FALSE(c.rotate);
  q = query(true, 7168, 128, 8, 14);
  q.rotate = 0;
  q.rowCopies = 0;
  q.stages = 8;
  c = chooseGemvStream(q);
  CHECK(c.stages == 6);  // fitStages
  CHECK_FALSE(c.rotate);
  CHECK_FALSE(c.rowCopies);
  q.stages = 0;
  CHECK(chooseGemvStream(q).stages == 0);
}

TEST_CASE("fcMatmulAllReduce's choice", "[tuning]") {
  using P = MatmulAllReducePath;
  auto pick = [](int W, size_t M, size_t N, size_t K, bool oneKernelFits, bool norm = false,
                 MatmulAllReduceAlgo forced = MatmulAllReduceAlgo::Auto, bool engineGathers = false,
                 bool decodeEngineFits = false, int decodeGemmSms = 0) {
    MatmulAllReduceQuery q;
    q.decodeGemmSms = decodeGemmSms;
    q.engineGathers = engineGathers;
    q.decodeEngineFits = decodeEngineFits;
    q.forced = forced;
    q.nranks = W;
    q.M = M, q.N = N, q.K = K;
    q.oneKernelFits = oneKernelFits;
    q.rowsSplit = M % size_t(W) == 0;
    q.norm = norm;
    return chooseMatmulAllReduce(q);
  };
  // Decode: the one kernel for one row with weights of up to 32 Mi elements.
  CHECK(pick(2, 1, 4096, 2048, true) == P::OneKernel);
  CHECK(pick(2, 1, 4096, 7168, true, true) == P::OneKernel);
  CHECK(pick(2, 1, 5120, 2560, true) == P::OneKernel);
  CHECK(pick(2, 1, 8192, 4096, true) == P::OneKernel);   // 32 Mi
  CHECK(pick(2, 1, 8192, 7168, true) == P::AllReduce);   // 56 Mi: cuBLAS reads B faster
  CHECK(pick(2, 1, 5120, 13824, true) == P::AllReduce);
  CHECK(pick(2, 1, 4096, 2048, false) == P::AllReduce);  // the kernel does not take the shape
  CHECK(pick(8, 1, 4096, 2048, true) == P::OneKernel);
  // 2-8 rows (its tensor-core form) with one tile of 32 columns per CTA (128) and
  // M x K x W <= 65536.
  CHECK(pick(2, 2, 4096, 2048, true) == P::OneKernel);    // 128 tiles
  CHECK(pick(2, 8, 4096, 2048, true, true) == P::OneKernel);
  CHECK(pick(2, 9, 4096, 2048, true) == P::AllReduce);    // past 8 rows
  CHECK(pick(2, 16, 4096, 2048, true, true) == P::AllReduce);
  CHECK(pick(2, 8, 4096, 4096, true) == P::OneKernel);
  CHECK(pick(2, 4, 4096, 7168, true, true) == P::OneKernel);
  // The decode engine: forced only, where it takes the call; else auto's choice.
  const auto Decode = MatmulAllReduceAlgo::Decode;
  CHECK(pick(2, 16, 4096, 7168, true, true, Decode, false, true) == P::DecodeEngine);
  CHECK(pick(2, 1, 4096, 7168, true, true, Decode, false, true) == P::DecodeEngine);
  CHECK(pick(2, 16, 4096, 7168, true, true, Decode) == P::AllReduce);
  CHECK(pick(2, 1, 4096, 2048, true, true, Decode) == P::OneKernel);
  CHECK(pick(2, 16, 4096, 7168, true, true, MatmulAllReduceAlgo::Auto, false, true) == P::AllReduce);
  CHECK(pick(2, 8, 4096, 7168, true) == P::AllReduce);    // 8 x 7168 x 2
  CHECK(pick(2, 16, 4096, 4096, true) == P::AllReduce);
  CHECK(pick(2, 8, 2048, 4096, true) == P::OneKernel);    // 64 tiles
  CHECK(pick(2, 4, 3584, 2048, true) == P::OneKernel);    // 112 tiles
  CHECK(pick(2, 4, 8192, 2048, true) == P::AllReduce);    // 256 tiles: two per CTA
  CHECK(pick(2, 4, 5120, 2560, true) == P::AllReduce);    // 160 tiles: the busiest SMs take two
  CHECK(pick(2, 17, 4096, 256, true) == P::AllReduce);
  CHECK(pick(4, 8, 4096, 2048, true) == P::OneKernel);    // 4 ranks: 8 x 2048 x 4
  CHECK(pick(4, 4, 4096, 4096, true) == P::OneKernel);
  CHECK(pick(4, 16, 4096, 2048, true) == P::AllReduce);
  CHECK(pick(4, 2, 4096, 7168, true) == P::OneKernel);
  CHECK(pick(4, 4, 4096, 7168, true) == P::AllReduce);    // 4 x 7168 x 4 > 65536
  CHECK(pick(8, 2, 4096, 2048, true) == P::AllReduce);    // untimed at 8 ranks
  CHECK(pick(8, 2, 4096, 2048, true, false, MatmulAllReduceAlgo::Fused) == P::OneKernel);
  CHECK(gemvMmaOneTilePerCta(4096, 128));
  CHECK_FALSE(gemvMmaOneTilePerCta(4096, 100));  // 128 tiles on 100 CTAs
  CHECK(gemvMmaOneTilePerCta(4104, 129));        // 129 tiles (the last partial)
  CHECK_FALSE(gemvMmaOneTilePerCta(8192, 128));
  CHECK(gemvAllReduceMma(2, 4096, 2048, 128));   // one 32-column tile a CTA
  CHECK_FALSE(gemvAllReduceMma(1, 4096, 2048, 128));
  CHECK_FALSE(gemvAllReduceMma(2, 5120, 2560, 128));  // 160 tiles on 128 CTAs: FMAs at 2 rows
  CHECK_FALSE(gemvAllReduceMma(2, 8192, 3584, 128));  // 28 Mi elements
  CHECK(gemvAllReduceMma(2, 5120, 13824, 128));       // 67.5 Mi: past auto's one-kernel weights
  CHECK(gemvAllReduceMma(2, 5120, 2560, 160));
  CHECK(gemvAllReduceMma(3, 8192, 1024, 128));        // from 3 rows MMAs everywhere
  CHECK(gemvAllReduceMma(8, 8192, 1024, 128));
  // Prefill: the reduce-scatter + all-gather at 2 ranks from 4096 rows per rank, plain form only.
  CHECK(pick(2, 8192, 4096, 2048, false) == P::ReduceScatterAllGather);
  CHECK(pick(2, 8192, 4096, 2048, false, true) == P::AllReduce);
  CHECK(pick(2, 2048, 4096, 2048, false) == P::AllReduce);
  CHECK(pick(4, 16384, 4096, 2048, false) == P::AllReduce);
  CHECK(pick(2, 8191, 4096, 2048, false) == P::AllReduce);  // rows do not split
  // Where the engine all-gathers in its epilogue: both forms from 1024 rows per rank.
  const auto Auto = MatmulAllReduceAlgo::Auto;
  CHECK(pick(2, 2048, 4096, 2048, false, false, Auto, true) == P::ReduceScatterAllGather);
  CHECK(pick(2, 2048, 4096, 2048, false, true, Auto, true) == P::ReduceScatterAllGather);
  CHECK(pick(2, 1024, 4096, 2048, false, true, Auto, true) == P::AllReduce);
  CHECK(pick(2, 4096, 4096, 7168, false, true, Auto, true) == P::ReduceScatterAllGather);
  CHECK(pick(2, 16384, 5120, 13824, false, true, Auto, true) == P::ReduceScatterAllGather);
  CHECK(pick(2, 1024, 4096, 2048, false, false, Auto, true) == P::AllReduce);
  CHECK(pick(2, 1, 4096, 2048, true, true, Auto, true) == P::OneKernel);
  // Forced paths, where they can run; one rank: the GEMM alone (the all-reduce path), the
  // one kernel with no peers only where forced (its own work timed on one GPU).
  CHECK(pick(2, 4, 4096, 2048, true, false, MatmulAllReduceAlgo::Fused) == P::OneKernel);
  CHECK(pick(2, 64, 4096, 2048, false, false, MatmulAllReduceAlgo::Fused) == P::ReduceScatterAllGather);
  CHECK(pick(2, 3, 4096, 2048, false, false, MatmulAllReduceAlgo::Fused) == P::AllReduce);
  CHECK(pick(2, 64, 4096, 2048, true, false, MatmulAllReduceAlgo::Engine) == P::ReduceScatterAllGather);
  CHECK(pick(2, 1, 4096, 2048, true, false, MatmulAllReduceAlgo::Unfused) == P::AllReduce);
  CHECK(pick(1, 1, 4096, 2048, true) == P::AllReduce);
  // The MMA form only where the all-reduce path's GEMM is cuBLASLt's: where the decode
  // GEMM takes the shape (K >= 1.5 N, a communicator on sm_90) the path is the all-reduce.
  auto pickDecodeGemm = [&](int W, size_t M, size_t N, size_t K, int decodeSms) {
    return pick(W, M, N, K, true, false, MatmulAllReduceAlgo::Auto, false, false, decodeSms);
  };
  CHECK(pickDecodeGemm(2, 4, 4096, 7168, 132) == P::AllReduce);
  CHECK(pickDecodeGemm(2, 2, 4096, 7168, 132) == P::AllReduce);
  CHECK(pickDecodeGemm(4, 2, 4096, 7168, 132) == P::AllReduce);
  CHECK(pickDecodeGemm(2, 4, 4096, 7168, 0) == P::OneKernel);      // FC_DECODE_GEMM=0: cuBLASLt
  CHECK(pickDecodeGemm(2, 1, 4096, 7168, 132) == P::OneKernel);    // the FMA form stays
  CHECK(pickDecodeGemm(2, 8, 4096, 2048, 132) == P::OneKernel);    // K < 1.5 N: cuBLASLt's GEMM
  CHECK(decodeGemmTokens(8, 2048, 4096, 132) > 0);
  CHECK(pickDecodeGemm(2, 8, 2048, 4096, 132) == P::AllReduce);    // K = 2 N
  CHECK(pickDecodeGemm(2, 8, 2048, 4096, 0) == P::OneKernel);
  CHECK(pick(1, 4, 4096, 2048, true, true, MatmulAllReduceAlgo::Fused) == P::OneKernel);
  CHECK(pick(1, 4, 4096, 2048, false, true, MatmulAllReduceAlgo::Fused) == P::AllReduce);
  CHECK(pick(1, 4, 4096, 2048, true, true, MatmulAllReduceAlgo::Engine) == P::AllReduce);
  CHECK(pick(1, 4, 4096, 2048, true, true, Decode, false, true) == P::AllReduce);
}
