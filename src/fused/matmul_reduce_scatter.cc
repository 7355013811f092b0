// fcMatmulReduceScatter: C_shard = reduce_scatter(A x op(B)), by one of five paths -
// the cuBLASLt pipeline (per-block GEMMs in destination order, each block pulled by
// its owner's copy engine under the next GEMM, after torch symm_mem's
// fused_matmul_reduce_scatter), the persistent GEMM engine (one CUTLASS GEMM whose
// tiles signal their owner; at 2 ranks the owner's tiles add the peer's partial in
// their epilogue, at 3-8 ranks each tile adds the next rank's fp32 running sum), and
// three unfused forms for small products (GEMM + the Lamport reduce-scatter, the
// scatter GEMM into the owners' workspaces, GEMM + fcReduceScatter's kernel).
// tuning::chooseMatmulReduceScatter picks one; planOf sizes its scratch.
// Partials in the input type (default) or fp32, summed in fp32, rounded once.
// docs/design.md, "Fused matmul + reduce-scatter" (the flows step by step).
#include <algorithm>

#include "collectives/collectives.h"
#include "collectives/copy_engine.h"
#include "core/datatype.h"
#include "core/log.h"
#include "core/result.h"
#include "fused/fused.h"
#include "gemm/engine/engine.h"
#include "tuning/tuning.h"

namespace fc {
namespace {

using Path = MmrsPath;

const char* pathName(Path p) {
  return p == Path::Pipeline  ? "pipeline"
         : p == Path::Lamport ? "lamport"
         : p == Path::Scatter ? "scatter"
         : p == Path::Engine  ? "engine"
                              : "staged";
}

// The partials' type: fp32, or the input type.
fcDataType_t partialType(const MatmulReduceScatterArgs& a) { return a.fp32Partials ? fcFloat32 : a.datatype; }

// Where the staged path's fp32 block sum starts in scratch: after the M x N partials.
size_t stagedSumOffset(size_t M, size_t N, size_t ps) { return (M * N * ps + 255) / 256 * 256; }

// Whether fcMatmulReduceScatter's engine may hand its tiles out interleaved (the
// tuning rule; FC_MMRS_ENGINE_LEAD forces a lead in both ops): at 2 ranks with the
// epilogue add. Not fcMatmulAllReduce's engine, which pushes its partials and gathers
// the sums: there 8 pieces, lead 2-3 measured level or behind (perf-log, forty-seventh
// session). The same on both ranks: the peer counts its tiles in our pieces.
tuning::MmrsInterleave interleave(const DeviceComm& dc, const MatmulReduceScatterArgs& a, int64_t blockRows) {
  if (dc.nranks != 2 || !a.engineEpilogueAdd || a.gatherToPeer || a.enginePushPartials) return {};
  return tuning::matmulReduceScatterInterleave(blockRows, a.K, int64_t(tuning::kEngineClusterRows));
}

// The engine's order: its pieces of a block, in rows, and its lead (EngineGemm::lead).
// The block is counted (and, summing after the GEMM, pulled) in pieces of whole tile
// rows, so that the first ones land while the peer still computes the rest: exactly
// FC_MMRS_ENGINE_PIECES where it is given (in the plain order unless FC_MMRS_ENGINE_LEAD
// is given too); else the interleave's pieces (whole cluster rows) and lead where it
// takes the shape; else tuning::matmulReduceScatterEnginePieces (a piece costs a gate
// and a copy) in the plain order. FC_MMRS_ENGINE_LEAD, where given, is the lead.
tuning::MmrsInterleave engineOrder(const DeviceComm& dc, const MatmulReduceScatterArgs& a, int64_t blockRows) {
  tuning::MmrsInterleave o = a.enginePieces > 0 ? tuning::MmrsInterleave{} : interleave(dc, a, blockRows);
  if (o.lead == 0) {
    const size_t blockBytes = size_t(blockRows) * a.N * dataTypeSize(partialType(a));
    const int64_t pieces = a.enginePieces > 0
                               ? std::min(a.enginePieces, kMaxPieces)
                               : tuning::matmulReduceScatterEnginePieces(blockBytes, tuning::kMmrsEnginePieces);
    const int64_t tileRows = (blockRows + 127) / 128;
    o.pieceRows = (tileRows + pieces - 1) / pieces * 128;
  }
  if (a.engineLead >= 0) o.lead = a.engineLead;
  return o;
}

// Whether the engine runs the chain of fp32 running sums (3-8 ranks,
// own_block_epilogue.cuh): every rank's [M, N] running sums fit its workspace, and its
// rows are 16 bytes in fp32. Unlike the 2-rank choice below this one must be the same
// on every rank (the peers' counters, where their signals land, differ), so it depends
// on the shape and the communicator only, not on C's alignment: a C the epilogue cannot
// store by TMA gets our block's fp32 sums converted after the GEMM instead (viaEngine).
bool engineChains(const DeviceComm& dc, const MatmulReduceScatterArgs& a) {
  return dc.nranks >= 3 && a.engineEpilogueAdd && a.N % 4 == 0 && a.M * a.N * sizeof(float) <= dc.workspaceBytes;
}

// Whether our own tiles add the pulled partial in the GEMM's epilogue (see above): at 2
// ranks a choice of this rank's alone (the peers see the same counters either way), so
// C's alignment (the epilogue stores it by TMA) may decide it; at 3-8 ranks the chain.
bool engineAddsInEpilogue(const DeviceComm& dc, const MatmulReduceScatterArgs& a) {
  return (dc.nranks == 2 && a.engineEpilogueAdd && reinterpret_cast<uintptr_t>(a.C) % 16 == 0) ||
         engineChains(dc, a);
}

// fcMatmulAllReduce's form of the engine with the epilogue add (2 ranks): it pushes
// partials into the peer's workspace and all-gathers the sums there (scatterGemm),
// behind an entry barrier (viaEngine): the peer may still read its workspace for its
// previous call until it has reached this one. (FC_MMRS_ENGINE_STAGES=epilogue-push:
// fcMatmulReduceScatter's pushes the partials the same way, without the gather.)
bool enginePushes(const DeviceComm& dc, const MatmulReduceScatterArgs& a) {
  return (a.gatherToPeer || a.enginePushPartials) && dc.nranks == 2 && engineAddsInEpilogue(dc, a);
}

// The engine's GEMM: every row of our partial product into our workspace, tile rows
// from rank+1's block on (ours last); each tile counts on its owner's counter of its
// piece for us (ours excepted: nobody waits for them). With the epilogue add, our
// block's tiles add the peer's partial, read in place from its workspace once our
// counters of its tiles say so, and store into C. Tiles are handed out dynamically
// (scatter_scheduler.cuh). Two SMs stay free for the gates of the copy queue
// (tile_gate.cu).
engine::EngineGemm scatterGemm(const DeviceComm& dc, int channel, const MatmulReduceScatterArgs& a) {
  const int64_t W = dc.nranks, ms = int64_t(a.M) / W, M = int64_t(a.M);
  const tuning::MmrsInterleave order = engineOrder(dc, a, ms);
  const int64_t pieceRows = order.pieceRows;
  // Our counters in every rank's tile counters (entry [dc.rank][piece]), at rank 0's
  // address + r * stride.
  char* countersOfRank0 =
      reinterpret_cast<char*>(tileCountersOf(dc, dc.rank, channel) + size_t(dc.rank) * kMaxPieces) -
      size_t(dc.rank) * dc.stride;
  engine::EngineGemm g{a.A,
                       a.B,
                       ce::slot(dc, dc.rank, channel, 0),
                       a.M,
                       a.N,
                       a.K,
                       a.transB,
                       a.datatype,
                       engine::ShardReadiness{nullptr, M, ms, ms, (dc.rank + 1) % W * ms, dc, channel},
                       a.smCount - 2,
                       engine::TileSignal{countersOfRank0, dc.stride, ms, pieceRows, dc.rank}};
  g.tileTicket = tileTicketOf(dc, channel);
  // At 2 ranks with the epilogue add allowed, 128 x 128 ping-pong tiles at every K: on 128
  // x 256 cooperative ones the epilogue add took 1.10-1.37x as long (each against its run's
  // GEMM alone) at 2048-8192 x 4096 x 2048 / 7168 and x 5120 x 2560 / 13824 (2 H200s,
  // fc-bench mmrsstages with FC_MMRS_ENGINE_TILES; perf-log, forty-fourth session). Also
  // where this rank sums after the GEMM instead (its C not 16-byte aligned): the peer
  // counts its tiles per piece for us, and both ranks must count the same tiles.
  if (dc.nranks == 2 && a.engineEpilogueAdd) g.tileN = a.engineTileN != 0 ? a.engineTileN : 128;
  if (engineChains(dc, a)) {
    // The chain: our fp32 running sums into our workspace ([M, N] at the product's
    // rows), the next rank's added from its own (it computed each of our blocks one step
    // before us), each tile counted on the previous rank's counters [block][piece] (it
    // adds our sums at its next step), our block's rounded sums into C.
    const int next = (dc.rank + 1) % dc.nranks, prev = (dc.rank - 1 + dc.nranks) % dc.nranks;
    g.signal.counters = reinterpret_cast<char*>(tileCountersOf(dc, prev, channel));
    g.signal.stride = kMaxPieces * sizeof(uint32_t);
    const bool cAligned = reinterpret_cast<uintptr_t>(a.C) % 16 == 0;
    g.source = engine::EpilogueSource{ce::slot(dc, next, channel, 0),
                                      cAligned ? a.C : nullptr,
                                      dc.rank * ms,
                                      ms,
                                      pieceRows,
                                      tileCountersOf(dc, dc.rank, channel),
                                      next};
    g.chain = true;
    g.tileN = 128;
  } else if (engineAddsInEpilogue(dc, a)) {
    const int producer = (dc.rank - 1 + dc.nranks) % dc.nranks;
    const size_t blockBytes = size_t(ms) * a.N * dataTypeSize(a.datatype);
    g.source = engine::EpilogueSource{ce::slot(dc, producer, channel, 0) + size_t(dc.rank) * blockBytes,
                                      a.C,
                                      dc.rank * ms,
                                      ms,
                                      pieceRows,
                                      tileCountersOf(dc, dc.rank, channel) + size_t(producer) * kMaxPieces,
                                      producer};
    g.lead = order.lead;
    // FC_MMRS_ENGINE_STAGES=epilogue-local (timing only): our own workspace's rows of our
    // block (nothing writes them) instead of the peer's partial, no waits.
    if (a.engineLocalSource) {
      g.source.C = ce::slot(dc, dc.rank, channel, 0) + size_t(dc.rank) * blockBytes;
      g.source.counters = nullptr;
    }
    if (enginePushes(dc, a)) {
      // fcMatmulAllReduce: our partial of the peer's block goes into the peer's
      // workspace as it is computed (the first half of the GEMM), the peer's partial of
      // ours is read from our own, and our block's sums go to the peer's workspace at
      // our block's rows (which nothing else uses there). Each half of the GEMM then
      // moves one block each way over NVLink, instead of the second half moving two:
      // pulled partials and pushed sums.
      g.D = ce::slot(dc, producer, channel, 0);
      g.source.C = ce::slot(dc, dc.rank, channel, 0) + size_t(dc.rank) * blockBytes;
      g.source.gather = a.gatherToPeer ? ce::slot(dc, producer, channel, 0) + size_t(dc.rank) * blockBytes : nullptr;
      // C in symmetric memory: straight into the peer's C instead, where the entry
      // barrier met the peers cleanly (a mismatched peer's C may lie elsewhere).
      if (a.gatherToPeer && a.gatherC != nullptr) {
        g.source.gather = a.gatherC + size_t(dc.rank) * blockBytes;
        g.source.gatherMet = barrierMetOf(dc, channel);
      }
      // FC_MMAR_ENGINE_STAGES (timing only, wrong results): the same stores into our
      // own workspace (the peer's block's rows there: nothing reads them), no pushed
      // sums, no waits.
      if (!a.enginePeerStores) {
        g.D = ce::slot(dc, dc.rank, channel, 0);
        g.source.gather = a.gatherToPeer ? ce::slot(dc, dc.rank, channel, 0) + size_t(producer) * blockBytes : nullptr;
        g.source.gatherMet = nullptr;
      }
      if (!a.engineGatherSums) g.source.gather = nullptr, g.source.gatherMet = nullptr;
      if (!a.engineOwnWaits) g.source.counters = nullptr;
      // Its tiles (both ranks alike: the same shape, the same rule or forced shape).
      g.tileN = a.engineTileN != 0 ? a.engineTileN
                : tuning::scatterEngineSmallTiles(a.M, a.N, a.K, g.smCount, true) ? 128 : 256;
    }
  }
  return g;
}

// The path, its chunks of rows (the pipeline) and the scratch it needs.
struct Plan {
  Path path;
  size_t chunks, chunkRows;
  size_t scratchBytes;
};

Plan planOf(const DeviceComm& dc, const MatmulReduceScatterArgs& a, FusedAlgo choice) {
  const size_t W = size_t(dc.nranks), ps = dataTypeSize(partialType(a));
  const size_t ms = a.M / W, blockElems = ms * a.N, partBytes = blockElems * ps;
  Plan p{};
  // The fused pipeline runs over chunks of rows of every block, as few as fit a
  // workspace slot, of equal size (the last one smaller).
  const size_t slotRows = ce::slotBytes(dc) / (a.N * ps);
  p.chunks = slotRows == 0 ? 0 : (ms + slotRows - 1) / slotRows;
  p.chunkRows = p.chunks == 0 ? 0 : (ms + p.chunks - 1) / p.chunks;
  tuning::MatmulReduceScatterQuery q;
  q.forced = choice;
  q.nranks = dc.nranks;
  q.gpuSms = a.gpuSms;
  q.M = a.M;
  q.N = a.N;
  q.K = a.K;
  q.chunkRows = p.chunkRows;
  q.partialBytes = W * partBytes;
  q.workspaceBytes = dc.workspaceBytes;
  // The engine: partials in the input type, all of them in our workspace, blocks of
  // whole tile rows.
  q.engineFits = W > 1 && !a.fp32Partials && a.smCount > 2 && a.M * a.N * ps <= dc.workspaceBytes &&
                 engine::scatterGemmSupports(scatterGemm(dc, 0, a));
  q.epilogueAdd = a.engineEpilogueAdd;
  q.allReduce = a.gatherToPeer;
  // The Lamport path: partials in the input type, where fcReduceScatter would take
  // its Lamport kernel for a block of them, all of them in our workspace.
  q.lamportFits = a.lamportReduceScatter && !a.fp32Partials && a.M * a.N * ps <= dc.workspaceBytes;
  p.path = tuning::chooseMatmulReduceScatter(q);
  if (W == 1) p.scratchBytes = 0;
  // Engine: the W-1 pulled partials of our block (none when the epilogue reads the
  // peer's in place).
  else if (p.path == Path::Engine)
    p.scratchBytes = engineAddsInEpilogue(dc, a) ? 0 : (W - 1) * partBytes;
  // Fused: the pulled partials of a chunk and our own (W blocks; W-1 with fp32
  // partials from W = 3 on, where our GEMM adds one pull in place: see fusedRows).
  else if (p.path == Path::Pipeline)
    p.scratchBytes = (a.fp32Partials && W >= 3 ? W - 1 : W) * p.chunkRows * a.N * ps;
  // Staged: every block's partial, then (fp32 partials) our block's fp32 sum.
  else if (p.path == Path::Staged)
    p.scratchBytes = a.fp32Partials ? stagedSumOffset(a.M, a.N, ps) + blockElems * sizeof(float) : a.M * a.N * ps;
  return p;
}

fcResult_t staged(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm, const MatmulReduceScatterArgs& a,
                  cudaStream_t stream) {
  const fcDataType_t pt = partialType(a);
  const size_t ps = dataTypeSize(pt), blockElems = a.M / size_t(dc.nranks) * a.N, partials = a.M * a.N * ps;
  void* all = a.scratch;
  // fp32 partials sum into fp32, rounded after; input-type ones straight into C.
  void* sum = a.fp32Partials ? static_cast<char*>(a.scratch) + stagedSumOffset(a.M, a.N, ps) : a.C;
  FC_CHECK(gemm.matmul(a.A, a.M, a.B, all, a.N, a.K, a.transB, a.datatype, stream, a.fp32Partials));
  if (tuning::matmulReduceScatterStagedMove(dc.nranks, partials) == MoveAlgo::CopyEngine)
    FC_CHECK(launchReduceScatterCe(dc, channel, copies, all, sum, blockElems, pt, stream));
  else
    FC_CHECK(launchReduceScatter(dc, channel, all, sum, blockElems, pt, nullptr, stream));
  if (!a.fp32Partials) return fcSuccess;
  return launchReducePartials(sum, nullptr, blockElems, 0, fcFloat32, a.C, blockElems, a.datatype, stream);
}

// GEMM + the Lamport reduce-scatter, the partials (input type) in our workspace (see
// the top).
fcResult_t viaLamport(const DeviceComm& dc, int channel, Gemm& gemm, const MatmulReduceScatterArgs& a,
                      uint32_t sig, cudaStream_t stream) {
  char* partials = ce::slot(dc, dc.rank, channel, 0);
  FC_CHECK(gemm.matmul(a.A, a.M, a.B, partials, a.N, a.K, a.transB, a.datatype, stream));
  // Our signature (the whole shape) in the call headers: ranks with another K are caught too.
  return launchReduceScatterLamport(dc, channel, partials, a.C, a.M / size_t(dc.nranks) * a.N, a.datatype, a.pdl,
                                    stream, sig);
}

// The fused pipeline over rows [r0, r0 + rows) of every block (all of them, or one
// chunk when a block's partial is larger than a workspace slot). buf: the partial
// blocks of `rows` rows that planOf sized.
fcResult_t fusedRows(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm,
                     const MatmulReduceScatterArgs& a, uint32_t sig, size_t r0, size_t rows, char* buf,
                     cudaStream_t stream) {
  const int W = dc.nranks, rank = dc.rank;
  const fcDataType_t pt = partialType(a);
  const size_t es = dataTypeSize(a.datatype), ms = a.M / size_t(W);
  const size_t elems = rows * a.N, bytes = elems * dataTypeSize(pt);
  auto rowsOf = [&](int d) { return static_cast<const char*>(a.A) + (size_t(d) * ms + r0) * a.K * es; };
  auto slotOf = [&](int r, int t) { return ce::slot(dc, r, channel, size_t(t)); };
  auto gemmInto = [&](int t) {  // step t's GEMM: block rank+t into slot t % 2
    return gemm.matmul(rowsOf((rank + t) % W), rows, a.B, slotOf(rank, t), a.N, a.K, a.transB, a.datatype, stream,
                       a.fp32Partials);
  };
  FC_CHECK(gemmInto(1));
  // Step t's communication: once our pull of step t-1 is done and every rank's block
  // of step t is in its slot (barrier t), pull ours from rank-t into buffer t-1.
  auto pull = [&](int t) -> fcResult_t {
    if (t >= 2) FC_CHECK(copies.waitMark(stream, size_t(t - 1)));
    FC_CHECK(launchOpBarrier(dc, channel, Op::MatmulReduceScatter, sig, stream));
    FC_CHECK(copies.after(stream, size_t(t)));
    FC_CHECK(ce::copy(buf + size_t(t - 1) * bytes, slotOf((rank - t + W) % W, t), bytes, copies.stream()));
    return copies.mark(size_t(t));
  };
  for (int t = 1; t + 1 < W; ++t) {
    FC_CHECK(pull(t));
    FC_CHECK(gemmInto(t + 1));
  }
  FC_CHECK(pull(W - 1));  // under the GEMM of our own block
  // fp32 partials, W >= 3: the pull of step 1 (buffer 0) has landed, and our GEMM adds
  // it in place. Otherwise our block goes into buffer W-1, after the pulls.
  const bool addInPlace = a.fp32Partials && W >= 3;
  char* ownSum = addInPlace ? buf : buf + size_t(W - 1) * bytes;
  MatmulOp own{rowsOf(rank), rows, a.B, a.N, a.K, a.transB, a.datatype, ownSum};
  own.dFp32 = a.fp32Partials;
  if (addInPlace) own.C = reinterpret_cast<const float*>(buf);
  FC_CHECK(gemm.matmul(own, stream));
  FC_CHECK(copies.waitMark(stream, size_t(W - 1)));
  // The blocks not yet added: 2..W-1 after our own + 1 in buffer 0, or every pull. The
  // sum reads only local memory, so it goes before the final barrier, whose wait for
  // the slowest rank's last pull it may then hide.
  const char* rest = addInPlace ? buf + bytes : buf;
  FC_CHECK(launchReducePartials(ownSum, rest, elems, addInPlace ? W - 2 : W - 1, pt,
                                static_cast<char*>(a.C) + r0 * a.N * es, elems, a.datatype, stream));
  // Final barrier: nobody pulls from our slots any more (the next chunk or call may
  // rewrite them).
  return launchOpBarrier(dc, channel, Op::MatmulReduceScatter, sig, stream);
}

// The engine path: one persistent GEMM writes our partial product into our workspace,
// block rank+1 first and ours last, its tiles counted per piece on their owner's
// counters once stored. Either the copy queue pulls our block from each peer piece by
// piece as soon as that peer's gate for the piece opens (it computes our block at
// step rank - r), while the GEMM goes on, and the final sum follows the GEMM; or (the
// epilogue add, 2 ranks; the chain, 3-8) the GEMM's tiles wait for the peer's tiles
// themselves and add its partial or running sum in place. Then the final barrier.
fcResult_t viaEngine(const DeviceComm& dc, int channel, CopyQueue& copies, const MatmulReduceScatterArgs& a,
                     uint32_t sig, cudaStream_t stream) {
  const int W = dc.nranks, rank = dc.rank;
  const size_t blockElems = a.M / size_t(W) * a.N, rowBytes = a.N * dataTypeSize(a.datatype);
  const size_t blockBytes = blockElems * dataTypeSize(a.datatype);
  engine::EngineGemm g = scatterGemm(dc, channel, a);
  const bool addInEpilogue = g.source.C != nullptr;
  const int64_t ms = g.signal.blockRows, pieceRows = g.signal.pieceRows, pieces = (ms + pieceRows - 1) / pieceRows;
  uint32_t* counters = tileCountersOf(dc, rank, channel);  // ours: entry [r][p], rank r's tiles of our piece p
  char* pulled = static_cast<char*>(a.scratch);  // rank-t's partial of our block at (t-1) * blockBytes
  // The copy queue after everything before on S (the scratch and the previous op).
  if (!addInEpilogue) FC_CHECK(copies.after(stream, 0));
  // Pushing into the peer's workspace: once the peer has reached this call. With PDL the
  // GEMM starts under this barrier - its first mainloops need nothing from the peer - and
  // its epilogue waits for the barrier's grid before its first store into the peer
  // (TileSignal::afterPreviousGrid). The barrier itself starts only after everything
  // before it on the stream has ended (a plain launch), the previous call's GEMM
  // included, so the tile ticket and the counters are back to zero when the GEMM starts.
  // (a.engineBarriers false: FC_MMAR_ENGINE_STAGES=bare, timing the GEMM kernel alone.)
  // With C in symmetric memory it records whether it met the peers cleanly, which our
  // tiles read before storing into the peer's C (g.source.gatherMet).
  if (enginePushes(dc, a) && a.engineBarriers) {
    FC_CHECK(launchOpBarrier(dc, channel, Op::MatmulReduceScatter, sig, stream, /*letNextStart=*/a.pdl, nullptr, 0,
                             /*recordMet=*/g.source.gatherMet != nullptr));
    g.pdl = a.pdl;
  }
  const fcResult_t gemm = engine::launchMatmulScatterGemm(g, stream);
  if (!addInEpilogue) {
    for (int t = 1; t < W; ++t) {
      const int r = (rank - t + W) % W;  // computes our block t-th
      for (int64_t p = 0; p < pieces; ++p) {
        const size_t r0 = size_t(p * pieceRows), rows = size_t(std::min(pieceRows, ms - p * pieceRows));
        if (a.engineGates)
          FC_CHECK(launchTileGate(dc, channel, counters + size_t(r) * kMaxPieces + size_t(p),
                                  uint32_t(engine::scatterGemmPieceTiles(g, p)), r, copies.stream()));
        if (a.enginePulls)
          FC_CHECK(ce::copy(pulled + size_t(t - 1) * blockBytes + r0 * rowBytes,
                            ce::slot(dc, r, channel, 0) + size_t(rank) * blockBytes + r0 * rowBytes,
                            rows * rowBytes, copies.stream()));
      }
    }
    FC_CHECK(copies.mark(size_t(W)));
    FC_CHECK(copies.waitMark(stream, size_t(W)));
  }
  if (!a.engineBarriers && addInEpilogue) return gemm;
  // The chain with a C it could not store into (not 16-byte aligned): our block's fp32
  // sums, in our workspace at its rows, rounded into C here.
  if (g.chain && g.source.D == nullptr && gemm == fcSuccess)
    FC_CHECK(launchReducePartials(ce::slot(dc, rank, channel, 0) + size_t(rank) * blockElems * sizeof(float), nullptr,
                                  blockElems, 0, fcFloat32, a.C, blockElems, a.datatype, stream));
  if (!addInEpilogue) {
    const char* own = ce::slot(dc, rank, channel, 0) + size_t(rank) * blockBytes;
    FC_CHECK(launchReducePartials(own, pulled, blockElems, W - 1, a.datatype, a.C, blockElems, a.datatype, stream));
  }
  // Final barrier: nobody reads our workspace any more (pulls, or the peer's epilogue).
  // It first puts our counters back to zero (our own counters stay zero: our tiles count
  // nothing), after the GEMM and the gates, before the peers count again (after the next
  // entry barrier).
  const fcResult_t barrier = launchOpBarrier(dc, channel, Op::MatmulReduceScatter, sig, stream, false, counters,
                                             W * kMaxPieces);
  return gemm != fcSuccess ? gemm : barrier;
}

}  // namespace

size_t matmulReduceScatterScratch(const DeviceComm& dc, const MatmulReduceScatterArgs& a, FusedAlgo choice) {
  return planOf(dc, a, choice).scratchBytes;
}

bool matmulReduceScatterGathers(const DeviceComm& dc, const MatmulReduceScatterArgs& a, FusedAlgo choice,
                                bool anyAlignment) {
  MatmulReduceScatterArgs b = a;
  if (anyAlignment) {
    auto aligned = [](const void* p) { return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) / 16 * 16); };
    b.A = aligned(a.A);
    b.B = aligned(a.B);
    b.C = aligned(a.C);
  }
  return a.gatherToPeer && enginePushes(dc, b) && planOf(dc, b, choice).path == Path::Engine;
}

int matmulReduceScatterGatherTileN(const DeviceComm& dc, const MatmulReduceScatterArgs& a) {
  return scatterGemm(dc, 0, a).tileN;
}

fcResult_t launchMatmulReduceScatter(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm,
                                     const MatmulReduceScatterArgs& a, FusedAlgo choice, cudaStream_t stream) {
  const int W = dc.nranks, rank = dc.rank;
  const size_t ms = a.M / size_t(W), blockElems = ms * a.N;
  if (W == 1) return gemm.matmul(a.A, a.M, a.B, a.C, a.N, a.K, a.transB, a.datatype, stream);

  const Plan plan = planOf(dc, a, choice);
  const Path path = plan.path;
  FC_TRACE("fcMatmulReduceScatter: M %zu N %zu K %zu: %s (%zu chunks of rows)", a.M, a.N, a.K, pathName(path),
           path == Path::Pipeline ? plan.chunks : size_t(1));
  if (path == Path::Staged) return staged(dc, channel, copies, gemm, a, stream);

  const uint32_t sig =
      a.sig != 0 ? a.sig
                 : opSignature(Op::MatmulReduceScatter, uint32_t(a.datatype), shapeKey(a.M, a.N, a.K, uint32_t(a.transB)));
  if (path == Path::Engine) return viaEngine(dc, channel, copies, a, sig, stream);
  if (path == Path::Lamport) return viaLamport(dc, channel, gemm, a, sig, stream);
  if (path == Path::Scatter) {
    // Entry barrier: peers are about to write into our workspace.
    const fcDataType_t pt = partialType(a);
    const size_t blockBytes = blockElems * dataTypeSize(pt);
    auto slotOf = [&](int r) { return ce::slot(dc, r, channel, 0); };
    FC_CHECK(launchOpBarrier(dc, channel, Op::MatmulReduceScatter, sig, stream));
    MatmulOp op{a.A, ms, a.B, a.N, a.K, a.transB, a.datatype, slotOf(0) + size_t(rank) * blockBytes};
    op.dFp32 = a.fp32Partials;
    op.batch = W;
    op.strideA = ms * a.K;
    op.strideD = dc.stride / dataTypeSize(pt);  // rank d's workspace: rank 0's + d * stride
    FC_CHECK(gemm.matmul(op, stream));
    FC_CHECK(launchOpBarrier(dc, channel, Op::MatmulReduceScatter, sig, stream));
    const char* mine = slotOf(rank);
    return launchReducePartials(mine, mine + blockBytes, blockElems, W - 1, pt, a.C, blockElems, a.datatype, stream);
  }

  char* buf = static_cast<char*>(a.scratch);
  for (size_t r0 = 0; r0 < ms; r0 += plan.chunkRows)
    FC_CHECK(fusedRows(dc, channel, copies, gemm, a, sig, r0, std::min(plan.chunkRows, ms - r0), buf, stream));
  return fcSuccess;
}

}  // namespace fc
