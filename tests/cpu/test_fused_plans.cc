// fcMatmulReduceScatter's engine flows as the host plans them (src/fused/
// matmul_reduce_scatter.cc), without a GPU: no CUDA call is made until a launch, so the
// plan (its path and scratch) is computed here from a communicator's plain device view
// at made-up addresses. The scratch tells the flows apart: the sum after the GEMM pulls
// the other ranks' W-1 partials of our block into scratch; the epilogue add (2 ranks)
// and the chain of running sums (3-8 ranks) read them in place and need none.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "device/device_comm.h"
#include "fused/fused.h"
#include "gemm/engine/interleave.h"

namespace {

constexpr size_t MiB = size_t(1) << 20;

// Rank `rank` of `nranks`, every rank's heap 1 GiB apart, channel 0's workspace at the
// heap's start.
fc::DeviceComm deviceComm(int rank, int nranks, size_t workspaceBytes) {
  fc::DeviceComm dc{};
  dc.base = reinterpret_cast<char*>(uintptr_t(0x7f0000000000u));
  dc.stride = uint64_t(1) << 30;
  dc.rank = rank;
  dc.nranks = nranks;
  dc.workspaceOffset = 0;
  dc.workspaceBytes = workspaceBytes;
  dc.maxCtas = 32;
  return dc;
}

// A bf16 M x N x K call (B [N, K]) on 132 SMs, the engine's epilogue flows allowed (the
// default stage set), every buffer 16-byte aligned unless cOffset says otherwise.
fc::MatmulReduceScatterArgs args(size_t M, size_t N, size_t K, uintptr_t cOffset = 0) {
  fc::MatmulReduceScatterArgs a;
  a.A = reinterpret_cast<const void*>(uintptr_t(0x7e0000000000u));
  a.B = reinterpret_cast<const void*>(uintptr_t(0x7e1000000000u));
  a.C = reinterpret_cast<void*>(uintptr_t(0x7e2000000000u) + cOffset);
  a.M = M;
  a.N = N;
  a.K = K;
  a.transB = fcOpT;
  a.datatype = fcBfloat16;
  a.smCount = 132;
  a.gpuSms = 132;
  a.engineEpilogueAdd = true;
  return a;
}

size_t scratchOf(int rank, int nranks, size_t workspaceBytes, const fc::MatmulReduceScatterArgs& a) {
  return fc::matmulReduceScatterScratch(deviceComm(rank, nranks, workspaceBytes), a, fc::FusedAlgo::Engine);
}

}  // namespace

TEST_CASE("fcMatmulReduceScatter's engine: the chain at 3-8 ranks reads every partial in place") {
  const size_t N = 4096, K = 2048;
  for (int W : {3, 4, 8}) {
    INFO(W << " ranks");
    // Blocks of 512 rows (whole 128-row tiles).
    const size_t m = size_t(W) * 512, block = 512 * N * 2;
    for (int rank = 0; rank < W; ++rank) CHECK(scratchOf(rank, W, 130 * MiB, args(m, N, K)) == 0);
    // C off 16-byte alignment: still the chain on this rank (its choice must match its
    // peers'), the fp32 sums rounded into C after the GEMM.
    CHECK(scratchOf(0, W, 130 * MiB, args(m, N, K, 2)) == 0);
    // The running sums (M x N fp32) larger than the workspace, the partials (bf16) not:
    // the sum after the GEMM, W-1 pulled partials.
    const size_t ws = m * N * 3;
    CHECK(scratchOf(0, W, ws, args(m, N, K)) == size_t(W - 1) * block);
    // The epilogue flows switched off (FC_MMRS_ENGINE_STAGES=full, or ranks time-slicing
    // a GPU): the sum after the GEMM.
    fc::MatmulReduceScatterArgs full = args(m, N, K);
    full.engineEpilogueAdd = false;
    CHECK(scratchOf(0, W, 130 * MiB, full) == size_t(W - 1) * block);
    // fcMatmulAllReduce's gather from the epilogue is a 2-rank form only.
    fc::MatmulReduceScatterArgs gather = args(m, N, K);
    gather.gatherToPeer = true;
    CHECK_FALSE(fc::matmulReduceScatterGathers(deviceComm(0, W, 130 * MiB), gather, fc::FusedAlgo::Engine));
  }
}

TEST_CASE("fcMatmulReduceScatter's engine at 2 ranks: the epilogue add where this rank's C takes TMA stores") {
  const size_t M = 4096, N = 4096, K = 2048, block = M / 2 * N * 2;
  CHECK(scratchOf(0, 2, 130 * MiB, args(M, N, K)) == 0);
  CHECK(scratchOf(1, 2, 130 * MiB, args(M, N, K)) == 0);
  // C off 16-byte alignment: this rank sums after the GEMM (its peers are unaffected:
  // they wait for the same counters either way).
  CHECK(scratchOf(0, 2, 130 * MiB, args(M, N, K, 2)) == block);
  // ... on the same tiles at every K, so that both ranks count a piece's tiles alike
  // (the rule would give 128 x 256 beyond K 2048 where it sums after the GEMM).
  for (size_t k : {size_t(2048), size_t(2560), size_t(7168), size_t(13824)}) {
    INFO("K " << k);
    const fc::DeviceComm dc = deviceComm(0, 2, 130 * MiB);
    CHECK(fc::matmulReduceScatterGatherTileN(dc, args(M, N, k)) == 128);
    CHECK(fc::matmulReduceScatterGatherTileN(dc, args(M, N, k, 2)) == 128);
  }
}

// The engine's interleaved tile order (gemm/engine/interleave.h), which the scheduler
// applies to its tickets: a permutation of the plain order (the peer's block, then ours)
// in which no piece of our block comes before the peer's piece of the same index or
// lead - 1 more of them, so that every wait of an own tile is for a peer tile handed out
// earlier on the peer (the progress argument), and which is the plain order without a lead.
TEST_CASE("the engine's interleaved tile order: a permutation that keeps the peer's pieces ahead") {
  for (uint32_t blockRows : {1u, 2u, 3u, 4u, 7u, 8u, 16u}) {
    for (uint32_t pieceRows = 1; pieceRows <= blockRows; ++pieceRows) {
      const uint32_t pieces = (blockRows + pieceRows - 1) / pieceRows;
      for (uint32_t lead = 0; lead <= pieces + 1; ++lead) {
        CAPTURE(blockRows, pieceRows, lead);
        std::vector<int> seen(2 * blockRows, 0);
        // Per row of the order: which block and piece it belongs to.
        int peerDone = 0;  // peer pieces wholly before this row
        std::vector<uint32_t> peerRowsSeen(pieces, 0);
        for (uint32_t pos = 0; pos < 2 * blockRows; ++pos) {
          const uint32_t row = fc::engine::interleavedRow(pos, blockRows, pieceRows, lead);
          REQUIRE(row < 2 * blockRows);
          ++seen[row];
          if (lead == 0 || lead >= pieces) CHECK(row == pos);
          const bool own = row >= blockRows;
          const uint32_t piece = (own ? row - blockRows : row) / pieceRows;
          if (!own) {
            const uint32_t rowsOfPiece = std::min(pieceRows, blockRows - piece * pieceRows);
            if (++peerRowsSeen[piece] == rowsOfPiece) ++peerDone;
          } else {
            // Own piece k only after the peer's pieces 0..k (+ lead - 1 where there are).
            const uint32_t need = std::min(pieces, lead == 0 ? pieces : std::max(piece + 1, piece + lead));
            CHECK(uint32_t(peerDone) >= need);
          }
        }
        for (uint32_t r = 0; r < 2 * blockRows; ++r) CHECK(seen[r] == 1);
      }
    }
  }
  // 4 pieces of one row, 2 ahead: P0 P1 O0 P2 O1 P3 O2 O3.
  const uint32_t expected[] = {0, 1, 4, 2, 5, 3, 6, 7};
  for (uint32_t pos = 0; pos < 8; ++pos) CHECK(fc::engine::interleavedRow(pos, 4, 1, 2) == expected[pos]);
}
