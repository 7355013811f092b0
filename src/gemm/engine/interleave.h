// The GEMM + reduce-scatter engine's interleaved tile order at 2 ranks (the schedule
// only; scatter_scheduler.cuh applies it to its tickets, a CPU test checks it).
//
// With the epilogue add, our block's tiles add the peer's partial of the same tile,
// which the peer computes in its own first half. In the plain order (the peer's block
// first, ours last) every byte of that partial crosses NVLink while our own tiles run:
// the second half of the GEMM carries the whole block's traffic and the first half
// none. Interleaved, the pieces of the two blocks alternate once `lead` pieces of the
// peer's block are ahead:
//   P0 .. P(lead-1), O0, P(lead), O1, P(lead+1), ..., the rest of O
// (P: the peer's block, O: ours, in pieces of the tile counters), so that the reads of
// the peer's partials spread over most of the GEMM.
//
// Progress (scatter_scheduler.cuh's argument, one level down): tile O_k waits for the
// peer's P_k only. In this order a piece O_k comes before P_i only where k < i, so every
// tile handed out before P_k is a P tile (never waits) or an O_j with j < k, whose wait
// ends by induction over k: as before, a running cluster waits only for tiles that
// running clusters of the peer have taken or will take, and the GEMM progresses as long
// as one cluster per rank runs. The ping-pong kernel's two warp groups store in tile
// order, so a P tile may wait behind an O tile of the same CTA handed out before it:
// again an O_j with j < k.
#pragma once

#include <cstdint>

namespace fc::engine {

// The row of the plain order (rows [0, blockRows) the peer's block, [blockRows, 2 x
// blockRows) ours) that row `pos` of the interleaved order takes; rows in any unit
// (the scheduler's: clusters of tile rows), pieces of pieceRows (the last: the rest).
// lead 0, or at least the pieces of a block: the plain order.
#ifdef __CUDACC__
__host__ __device__
#endif
inline uint32_t interleavedRow(uint32_t pos, uint32_t blockRows, uint32_t pieceRows, uint32_t lead) {
  const uint32_t pieces = pieceRows == 0 ? 0 : (blockRows + pieceRows - 1) / pieceRows;
  if (lead == 0 || lead >= pieces || pos >= 2 * blockRows) return pos;
  uint32_t p = 0, o = 0;  // the next piece of the peer's block, of ours
  bool ownNext = true;    // after the lead, the blocks alternate, ours first
  while (o < pieces) {
    const bool own = p == pieces || (p >= lead && ownNext);
    const uint32_t k = own ? o++ : p++;
    const uint32_t first = k * pieceRows, rows = blockRows - first < pieceRows ? blockRows - first : pieceRows;
    if (pos < rows) return (own ? blockRows : 0) + first + pos;
    pos -= rows;
    ownNext = !own;
  }
  return pos;  // (not reached: pos < 2 x blockRows)
}

}  // namespace fc::engine
