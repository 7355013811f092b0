// fcAllGatherMatmul: C = allgather(A_shard) x op(B), by one of three paths - the
// cuBLASLt pipeline (the copy engine pulls the peers' shards in rank-rotated order
// while per-group GEMMs consume those that landed, after torch symm_mem's
// fused_all_gather_matmul; in passes of rows where a shard is larger than a workspace
// slot), the persistent GEMM engine (one CUTLASS GEMM whose tile rows wait, bounded, for
// each shard's flag; shards pushed by the peers straight from A where they can be), or
// unfused (all-gather, then one GEMM).
// tuning::chooseAllGatherMatmul picks one, the same on every rank. The gathered rows
// go to Agathered, else the channel's scratch (comm/scratch.h).
// docs/design.md, "Fused all-gather + GEMM" (the flows step by step).
#include <algorithm>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/copy_engine.h"
#include "core/datatype.h"
#include "core/log.h"
#include "core/result.h"
#include "fused/fused.h"
#include "fused/shard_push.h"
#include "gemm/engine/engine.h"
#include "tuning/tuning.h"

namespace fc {
namespace {

struct Group {
  int first, last;  // pull steps t (1..W-1), inclusive
};

// Greedy plan over the pull steps: each GEMM takes the next shard (waiting for it if
// needed) and every following one that has landed by then and continues its rows. The
// cost model is the tuning table's (tuning::pipelinePullSeconds / pipelineGemmSeconds).
std::vector<Group> planGroups(int W, int rank, size_t shardRows, size_t N, size_t K, size_t shardBytes) {
  std::vector<Group> groups;
  const double tc = tuning::pipelinePullSeconds(shardBytes);
  double now = tuning::pipelineGemmSeconds(shardRows, N, K);  // our own rows first
  for (int next = 1; next < W;) {
    now = std::max(now, tc * next);
    int last = next;
    while (last + 1 < W && tc * (last + 1) <= now && (rank + last) % W != W - 1) ++last;
    groups.push_back({next, last});
    now += tuning::pipelineGemmSeconds(size_t(last - next + 1) * shardRows, N, K);
    next = last + 1;
  }
  return groups;
}

fcResult_t unfused(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm,
                   const AllGatherMatmulArgs& a, const SymSource* symA, char* gathered, cudaStream_t stream) {
  const size_t W = size_t(dc.nranks), es = dataTypeSize(a.datatype);
  const size_t shardElems = a.M / W * a.K;
  // tuning::allGatherMatmulGather: the Lamport all-gather (one round trip, no barriers:
  // collectives/lamport_move.cu) only into the scratch: it may turn NaNs whose bits are
  // all ones into other NaNs, which the GEMM cannot tell apart but a caller's Agathered
  // could. Else fcAllGather's rule (not its FC_ALLGATHER_ALGO).
  switch (tuning::allGatherMatmulGather(int(W), shardElems * es, a.Agathered != nullptr)) {
    case MoveAlgo::Lamport:
      FC_CHECK(launchAllGatherLamport(dc, channel, a.A, gathered, shardElems, a.datatype, a.pdl, stream));
      break;
    case MoveAlgo::CopyEngine:
      FC_CHECK(launchAllGatherCe(dc, channel, copies, a.A, gathered, shardElems, a.datatype, symA, stream));
      break;
    default: FC_CHECK(launchAllGather(dc, channel, a.A, gathered, shardElems, a.datatype, symA, stream));
  }
  return gemm.matmul(gathered, a.M, a.B, a.C, a.N, a.K, a.transB, a.datatype, stream);
}

// How a call moves the rows, hashed into the op's signature at its barriers with the
// shape: the path, and where the peers read a shard (from its rank's symmetric A, or
// staged in its workspace, at offset 0 or at its rows of the gathered buffer there).
// Ranks whose calls differ in it (a caller's Agathered or a symmetric A on some ranks
// only, an A that only some ranks' engine can read, FC_AGMM_* set differently) are then
// a mismatch at the first barrier (fcInvalidUsage naming both calls), not pulls of rows
// that were never staged or waits that time out.
enum class Form : uint32_t { Pipeline, Engine, EnginePushed, PassesPulled, PassesPushed, PassesPushedOwnFirst };

// kPieces: the pushed shards' pieces of K columns (a peer counting other pieces would
// wait for a count that never comes).
uint32_t signatureOf(const AllGatherMatmulArgs& a, Form form, bool zeroCopy = false, bool inWorkspace = false,
                     uint32_t kPieces = 0) {
  const uint32_t how = uint32_t(a.transB) | uint32_t(form) << 1 | uint32_t(zeroCopy) << 4 |
                       uint32_t(inWorkspace) << 5 | kPieces << 6;
  return opSignature(Op::AllGatherMatmul, uint32_t(a.datatype), shapeKey(a.M, a.N, a.K, how));
}

// Where rank r's shard is read from: its symmetric A, or where r staged it in its
// workspace (at offset `staged` of the channel's first slot).
const char* shardSource(const DeviceComm& dc, int channel, const SymSource* symA, int r, size_t staged = 0) {
  return symA ? symA->base + size_t(r) * symA->stride + symA->offset : ce::slot(dc, r, channel, 0) + staged;
}

// The engine's GEMM over the gathered rows `A`, in shards of shardRows rows landing in
// pieces of pieceRows rows, each counted in flags[shard] (NULL: nothing to wait for).
engine::EngineGemm engineGemm(const DeviceComm& dc, int channel, const AllGatherMatmulArgs& a, const void* A,
                                 size_t shardRows, size_t pieceRows, const uint32_t* flags) {
  engine::EngineGemm g{A,       a.B, a.C, a.M, a.N, a.K, a.transB, a.datatype,
                       engine::ShardReadiness{flags, int64_t(a.M), int64_t(shardRows), int64_t(pieceRows),
                                              int64_t(dc.rank) * int64_t(shardRows), dc, channel},
                       a.smCount};
  // The width the pulls leave fastest (FC_AGMM_ENGINE_TILES forces one).
  g.tileN = a.engineTileN != 0 ? a.engineTileN
                               : tuning::allGatherEngineTileN(a.M, a.N, a.K, dc.nranks, a.smCount);
  return g;
}

// The engine's pieces (FC_AGMM_ENGINE_PIECES) in rows: whole 128-row tile rows, so
// that a piece's flag frees whole tile rows.
size_t enginePieceRows(const AllGatherMatmulArgs& a, size_t shardRows) {
  const size_t pieces = size_t(std::max(a.enginePieces, 1));
  return std::max<size_t>((shardRows / pieces + 127) / 128 * 128, 1);
}

// The pushed shards' pieces of K columns (FC_AGMM_ENGINE_KPIECES): whole k-blocks of
// the engine's tiles, so that a piece's flag frees whole k-blocks; 0: pieces of rows.
size_t engineKPieceCols(const AllGatherMatmulArgs& a) {
  const size_t pieces = size_t(std::max(a.engineKPieces, 1));
  const size_t kBlocks = (a.K + size_t(engine::kEngineTileK) - 1) / size_t(engine::kEngineTileK);
  const size_t cols = (kBlocks + pieces - 1) / pieces * size_t(engine::kEngineTileK);
  return pieces > 1 && cols < a.K ? cols : 0;
}

// Whether the engine's GEMM can read our shard's rows in place from A
// (own_rows_mainloop.cuh): shards of whole 128-row tile rows (a tile row across two
// shards would need ours in the gathered buffer too) and an A that TMA can read.
bool ownRowsInPlace(const DeviceComm& dc, const AllGatherMatmulArgs& a) {
  return (a.M / size_t(dc.nranks)) % 128 == 0 && reinterpret_cast<uintptr_t>(a.A) % 16 == 0;
}

// S: stage our shard (unless A is zero-copy) and meet the peers at the op's barrier:
// every rank's shard is then readable. Q, after that: pull the others into
// `gathered` in rotated order (rank+1, rank+2, ...), each in pieces of pieceRows rows,
// calling landed(t, s, c) after piece c of step t (shard s). pull false (timing only,
// FC_AGMM_ENGINE_STAGES=no-pull): every landed() without its pull. inWorkspace: the
// gathered buffer is the channel's workspace itself (gatheredInWorkspace), each rank's
// shard staged in its own rows there.
// sig: the op's signature at the barrier (signatureOf).
template <typename Landed>
fcResult_t stageAndPull(const DeviceComm& dc, int channel, CopyQueue& copies, const AllGatherMatmulArgs& a,
                        const SymSource* symA, char* gathered, size_t pieceRows, uint32_t sig, cudaStream_t stream,
                        Landed landed, bool pull = true, bool inWorkspace = false, bool letNextStart = false) {
  const int W = dc.nranks, rank = dc.rank;
  const size_t shardRows = a.M / size_t(W), rowBytes = a.K * dataTypeSize(a.datatype);
  const size_t shardBytes = shardRows * rowBytes;
  auto staged = [&](int r) { return inWorkspace ? size_t(r) * shardBytes : 0; };
  if (!symA) FC_CHECK(ce::copy(ce::slot(dc, rank, channel, 0) + staged(rank), a.A, shardBytes, stream));
  FC_CHECK(launchOpBarrier(dc, channel, Op::AllGatherMatmul, sig, stream, letNextStart));
  FC_CHECK(copies.after(stream, 0));
  for (int t = 1; t < W; ++t) {
    const int s = (rank + t) % W;
    const char* from = shardSource(dc, channel, symA, s, staged(s));
    for (size_t r0 = 0, c = 0; r0 < shardRows; r0 += pieceRows, ++c) {
      const size_t rows = std::min(pieceRows, shardRows - r0);
      if (pull)
        FC_CHECK(ce::copy(gathered + size_t(s) * shardBytes + r0 * rowBytes, from + r0 * rowBytes,
                          rows * rowBytes, copies.stream()));
      FC_CHECK(landed(t, s, c));
    }
  }
  return fcSuccess;
}

// The pipeline in passes with our rows pushed (FC_AGMM_PASSES=push-own-first, the default,
// or push; 2 ranks, no Agathered, every stage on): pass p's rows of ours go from A
// straight into the peer's slot p % 2, and the peer's GEMM reads them there, so a pass
// moves its rows once (one copy over NVLink) where the pulled form copies them twice
// (staged into our slot, then pulled into the peer's gathered rows), a copy whose HBM
// traffic the GEMM beside it shares (fc-bench agmmstages, perf-log: the copies cost it
// 26-41 us at 24576-32768 x 3072 x 4096). On the caller's stream S and the copy queue Q,
// push: per pass p
//   S: the op's barrier: every rank has run its GEMMs of pass p - 1, so the slot p % 2,
//      which its peer's GEMM of pass p - 2 read, is free on every rank
//   Q (after it): our rows of the pass into the peer's slot p % 2, then a stream write of
//      p + 1 into the peer's flag for us (after a memory barrier: a peer that sees the
//      value sees the rows)
//   S: the GEMM of our rows of the pass from A (under the push); a gate kernel until our
//      flag for the peer holds p + 1 (bounded, as every wait); the GEMM of the peer's rows
//      from our slot
// push-own-first: our rows' GEMM whole, in front, instead of a piece per pass (one GEMM
// where there were `passes`, each losing a partial wave), and a barrier only where a
// slot is reused, on Q (below):
//   Q (after S's work so far): the op's barrier, then passes 0 and 1 pushed, each flagged
//      as above
//   S: the GEMM of all our rows from A (at once: under the barrier and those pushes)
//   per pass p: S: the gate for p + 1; the GEMM of the peer's rows from our slot p % 2;
//      where a pass p + 2 follows, Q (after that GEMM): a barrier (every rank has run its
//      GEMM of the peer's pass p: slot p % 2 is free on every rank), then pass p + 2
//      pushed into it (under the GEMM of pass p + 1)
// The barriers run on Q (push-own-first and push alike): Q waits for S's work so far
// first, so a barrier means what it meant on S, but S does not wait for it; S waits only
// in its gates. Also a shard that fits a slot takes this form, in one pass, where the
// pipeline is chosen at 2 ranks (pushesPasses): our GEMM starts with the op, under the
// barrier and the push, the peer's once its rows have landed.
// The gate waits for a flag of at least p + 1: the peer's push of pass p + 1 may have
// signalled before our gate for p runs (after the barrier that follows our GEMM of its
// pass p - 1).
// Then S waits for Q (A is the caller's again) and clears our flags: the peer's last
// write into them has landed (the gate saw it), and its next writes follow the next
// call's first barrier, which we reach after this. No final barrier: as in the engine's
// pushed path (viaEnginePush), nobody reads our memory after our last GEMM, and the next
// op's barrier orders the next writes into our slots. The flags are the pushed engine
// path's words (kPushFlagsOffset), which that path also leaves zero. The barriers carry
// the form in the op's signature: a peer that pulls or pushes otherwise (FC_AGMM_PASSES
// set otherwise there) is a mismatch at the first barrier, not a gate that times out.
// passes / passRows: pipelineInPasses' geometry.
fcResult_t pipelineInPassesPushed(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm,
                                  const AllGatherMatmulArgs& a, size_t passes, size_t passRows,
                                  cudaStream_t stream) {
  const int rank = dc.rank, peer = 1 - rank;
  const size_t es = dataTypeSize(a.datatype), shardRows = a.M / 2, rowBytes = a.K * es, cRowBytes = a.N * es;
  const char* A = static_cast<const char*>(a.A);
  char* C = static_cast<char*>(a.C);
  const bool ownFirst = a.passes == AgmmPasses::PushOwnFirst;
  const uint32_t sig = signatureOf(a, ownFirst ? Form::PassesPushedOwnFirst : Form::PassesPushed);
  uint32_t* flags = engineFlagsOf(dc, kPushFlagsOffset, rank, channel);
  uint32_t* peerFlag = engineFlagsOf(dc, kPushFlagsOffset, peer, channel) + rank;
  auto rowsOf = [&](size_t p) { return std::min(passRows, shardRows - p * passRows); };
  // Q, after S's work so far: the op's barrier, then passes [first, last) pushed into the
  // peer's slots, each flagged. The barrier on Q, not S: nothing on S waits for it (S
  // reads only A and, after its gates, our own slots), so our rows' GEMM starts at once.
  auto meetThenPush = [&](size_t first, size_t last) -> fcResult_t {
    FC_CHECK(copies.after(stream, 0));
    FC_CHECK(launchOpBarrier(dc, channel, Op::AllGatherMatmul, sig, copies.stream()));
    for (size_t p = first; p < last; ++p) {
      FC_CHECK(ce::copy(ce::slot(dc, peer, channel, p), A + p * passRows * rowBytes, rowsOf(p) * rowBytes,
                        copies.stream()));
      FC_CHECK(copies.signal(peerFlag, uint32_t(p + 1)));
    }
    return fcSuccess;
  };
  auto ownRows = [&](size_t r0, size_t rows) {  // on S: the GEMM of our rows r0.. from A
    return gemm.matmul(A + r0 * rowBytes, rows, a.B, C + (size_t(rank) * shardRows + r0) * cRowBytes, a.N, a.K,
                       a.transB, a.datatype, stream);
  };
  auto peerRows = [&](size_t p) -> fcResult_t {  // on S: wait for the peer's pass p, its GEMM from our slot
    FC_CHECK(launchGate(dc, channel, Op::AllGatherMatmul, WaitKind::Shard, flags + peer, uint32_t(p + 1), peer,
                        stream));
    return gemm.matmul(ce::slot(dc, rank, channel, p), rowsOf(p), a.B,
                       C + (size_t(peer) * shardRows + p * passRows) * cRowBytes, a.N, a.K, a.transB, a.datatype,
                       stream);
  };
  FC_TRACE("fcAllGatherMatmul: the pipeline in %zu passes of %zu rows, pushed%s", passes, passRows,
           ownFirst ? ", our rows first" : "");
  if (ownFirst) {
    FC_CHECK(meetThenPush(0, std::min<size_t>(passes, ce::kSlots)));
    FC_CHECK(ownRows(0, shardRows));
    for (size_t p = 0; p < passes; ++p) {
      FC_CHECK(peerRows(p));
      if (p + ce::kSlots < passes) FC_CHECK(meetThenPush(p + ce::kSlots, p + ce::kSlots + 1));
    }
  } else {
    for (size_t p = 0; p < passes; ++p) {
      FC_CHECK(meetThenPush(p, p + 1));
      FC_CHECK(ownRows(p * passRows, rowsOf(p)));
      FC_CHECK(peerRows(p));
    }
  }
  FC_CHECK(copies.mark(1));
  FC_CHECK(copies.waitMark(stream, 1));
  FC_CUDA_CHECK(cudaMemsetAsync(flags, 0, 2 * sizeof(uint32_t), stream));
  return fcSuccess;
}

// Whether the pipeline pushes its passes (pipelineInPassesPushed): 2 ranks, no Agathered,
// every stage on, FC_AGMM_PASSES not pull.
bool pushesPasses(const DeviceComm& dc, const AllGatherMatmulArgs& a) {
  return a.passes != AgmmPasses::Pull && dc.nranks == 2 && a.Agathered == nullptr && a.enginePulls && a.engineWaits;
}

// The pipeline for a shard beyond a workspace slot (issue 45: no cliff at long
// prefills): its rows in passes of at most a slot, the two slots in turn, as fcAllGather's
// copy-engine form moves them (all_gather_ce.cc). S stages pass 0 in slot 0; then per
// pass p:
//   S: the op's barrier: every rank's rows of pass p are staged in its slot p % 2, and
//      every rank has waited for its pulls of pass p - 1 (the end of the loop), so slot
//      (p + 1) % 2, which they read, is free on every rank
//   Q (after it): the peers' rows of the pass into the gathered buffer (rank+1, rank+2,
//      ..., mark t after step t); our own rows into a caller's Agathered; then our rows of
//      pass p + 1 into slot (p + 1) % 2 (under S's GEMMs below); mark W
//   S: the GEMM of our own rows of the pass, from A (under the pulls); each peer's rows
//      once its mark is reached (a GEMM each: one peer's rows of a pass do not continue
//      the next one's in C); then wait for mark W
// Then the final barrier: nobody pulls from our slots any more. No copy of ours is
// exposed but the first pass's staging, and per pass the barrier and the pulls that our
// own rows' GEMM does not cover.
// a.enginePulls / a.engineWaits false (FC_AGMM_ENGINE_STAGES no-pull / no-wait, with
// the engine forced: it falls back to this path; timing only, see comm.h) leave out the
// copies (pulls and staging) / the peers' GEMMs' waits for their pulls, so that fc-bench
// agmmstages at a shard beyond a slot tells the fixed costs (barriers, the GEMM in
// pieces) from what the copies cost.
fcResult_t pipelineInPasses(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm,
                            const AllGatherMatmulArgs& a, char* gathered, cudaStream_t stream) {
  const int W = dc.nranks, rank = dc.rank;
  const size_t es = dataTypeSize(a.datatype), shardRows = a.M / size_t(W);
  const size_t rowBytes = a.K * es, cRowBytes = a.N * es;
  const size_t slotRows = ce::slotBytes(dc) / rowBytes;  // >= 1 (tuning: pipelineInPasses)
  const size_t passes = (shardRows + slotRows - 1) / slotRows, passRows = (shardRows + passes - 1) / passes;
  if (pushesPasses(dc, a)) return pipelineInPassesPushed(dc, channel, copies, gemm, a, passes, passRows, stream);
  const char* A = static_cast<const char*>(a.A);
  char* C = static_cast<char*>(a.C);
  const uint32_t sig = signatureOf(a, Form::PassesPulled);
  auto rowsOf = [&](size_t p) { return std::min(passRows, shardRows - p * passRows); };
  auto stage = [&](size_t p, cudaStream_t on) {
    return ce::copy(ce::slot(dc, rank, channel, p), A + p * passRows * rowBytes, rowsOf(p) * rowBytes, on);
  };
  FC_TRACE("fcAllGatherMatmul: the pipeline in %zu passes of %zu rows", passes, passRows);
  if (a.enginePulls) FC_CHECK(stage(0, stream));
  for (size_t p = 0; p < passes; ++p) {
    const size_t r0 = p * passRows, rows = rowsOf(p);
    auto gatheredRows = [&](size_t s) { return gathered + (s * shardRows + r0) * rowBytes; };
    FC_CHECK(launchOpBarrier(dc, channel, Op::AllGatherMatmul, sig, stream));
    FC_CHECK(copies.after(stream, 0));
    for (int t = 1; t < W; ++t) {
      const int s = (rank + t) % W;
      if (a.enginePulls)
        FC_CHECK(ce::copy(gatheredRows(size_t(s)), ce::slot(dc, s, channel, p), rows * rowBytes, copies.stream()));
      FC_CHECK(copies.mark(size_t(t)));
    }
    if (a.enginePulls && a.Agathered != nullptr && gatheredRows(size_t(rank)) != A + r0 * rowBytes)  // in place: there
      FC_CHECK(ce::copy(gatheredRows(size_t(rank)), A + r0 * rowBytes, rows * rowBytes, copies.stream()));
    if (a.enginePulls && p + 1 < passes) FC_CHECK(stage(p + 1, copies.stream()));
    FC_CHECK(copies.mark(size_t(W)));
    FC_CHECK(gemm.matmul(A + r0 * rowBytes, rows, a.B, C + (size_t(rank) * shardRows + r0) * cRowBytes, a.N, a.K,
                         a.transB, a.datatype, stream));
    for (int t = 1; t < W; ++t) {
      const size_t s = size_t((rank + t) % W);
      if (a.engineWaits) FC_CHECK(copies.waitMark(stream, size_t(t)));
      FC_CHECK(gemm.matmul(gatheredRows(s), rows, a.B, C + (s * shardRows + r0) * cRowBytes, a.N, a.K, a.transB,
                           a.datatype, stream));
    }
    FC_CHECK(copies.waitMark(stream, size_t(W)));
  }
  return launchOpBarrier(dc, channel, Op::AllGatherMatmul, sig, stream);
}

// Whether the whole gathered A fits the channel's workspace.
bool workspaceHoldsGathered(const DeviceComm& dc, const AllGatherMatmulArgs& a) {
  return a.M * a.K * dataTypeSize(a.datatype) <= dc.workspaceBytes;
}

// Whether the engine path gathers A in the channel's workspace itself: our shard staged
// in its own rows there is at once what the peers pull and what our GEMM reads, one
// copy instead of two (the staging copy and the copy into our rows of the gathered
// buffer), which with a barrier were most of the engine's fixed cost in front of its
// GEMM (perf-log.md, the ninth session's agmmstages). Not for a caller's Agathered (the rows must end up there) nor a symmetric A (nothing staged).
bool gatheredInWorkspace(const DeviceComm& dc, const AllGatherMatmulArgs& a, const SymSource* symA) {
  return symA == nullptr && a.Agathered == nullptr && workspaceHoldsGathered(dc, a);
}

// Whether the engine pushes (viaEnginePush): a plain A (nothing to pull it from) or a
// symmetric one under FC_AGMM_SYMMETRIC=push, the gathered rows in the workspace (the
// only buffer of ours the peers can write), and our rows read in place (they are never
// copied into the workspace). A caller's Agathered only with a plain A and where it is
// filled beside the GEMM (FC_AGMM_AGATHERED=beside): with a symmetric A the pulls land
// in it directly, a copy fewer. A symmetric A pushed takes the plain A's signature:
// ranks whose A differs in that alone run the same form.
bool pushesShards(const DeviceComm& dc, const AllGatherMatmulArgs& a, const SymSource* symA) {
  const bool form = symA == nullptr ? a.Agathered == nullptr || a.agatheredBeside
                                    : a.symmetricPush && a.Agathered == nullptr;
  return form && workspaceHoldsGathered(dc, a) && ownRowsInPlace(dc, a);
}

// The engine path without a staging copy. On the caller's stream S:
//   S: the op's barrier: every rank's earlier work is done, so every workspace is free
//      (and every push flag zero: each call clears its own before it returns); it
//      lets the GEMM start at once (letNextStart)
//   S: the GEMM, launched with PDL: our own tile rows straight from the caller's A,
//      the others from our workspace once their flags say they landed
//   Q (after the barrier): our shard from A into each peer's workspace, at our rows, in
//      pieces (of rows; of K columns with FC_AGMM_ENGINE_KPIECES), each followed by a
//      stream write of its count into the peer's flag for us (with a memory barrier: a
//      peer that sees the count sees the rows), peers in the order they read us (rank-1
//      first: we are its next shard); with FC_AGMM_ENGINE_PUSH=sm instead on S, a push
//      kernel between the barrier and the GEMM (shard_push.cu), flagging the same counts
//   Q (FC_AGMM_AGATHERED=beside, a caller's Agathered): our rows from A into it, then
//      each peer's rows from our workspace once its flag says all of them landed (a
//      gate kernel on Q, bounded as every wait), in the order the peers push to us;
//      beside the GEMM, which reads the same rows where they are
//   S: wait for Q (A is the caller's again), then clear our flags (kPushFlagsOffset,
//      words of this path alone): every peer's write into them has landed (the GEMM waited
//      for their last values), and the next call's pushes start behind a barrier we
//      reach after this
// No barrier at the end: nobody reads our memory, and everything written into it (the
// peers' rows, then their flags) has landed once our GEMM has waited for the flags; the
// next op's barrier, or the next call's, orders the next writes into the workspace
// (copy_engine.h's rule, with the flags in place of a final barrier). Unless the GEMM
// does not wait (FC_AGMM_ENGINE_STAGES=no-wait, timing only): then a final barrier,
// before the flags are cleared (the peers' writes into them have then landed).
// Ranks sharing a GPU (engineAfterPulls) wait for every shard before the GEMM, with a
// gate kernel per peer (their time-sliced persistent GEMMs would otherwise spin while
// the pushes wait for a slice).
fcResult_t viaEnginePush(const DeviceComm& dc, int channel, CopyQueue& copies, const AllGatherMatmulArgs& a,
                         cudaStream_t stream) {
  const int W = dc.nranks, rank = dc.rank;
  const size_t es = dataTypeSize(a.datatype), shardRows = a.M / size_t(W), rowBytes = a.K * es;
  const size_t shardBytes = shardRows * rowBytes;
  const size_t pieceRows = enginePieceRows(a, shardRows), kPieceCols = engineKPieceCols(a);
  const size_t piecesPerShard =
      kPieceCols > 0 ? (a.K + kPieceCols - 1) / kPieceCols : (shardRows + pieceRows - 1) / pieceRows;
  const char* A = static_cast<const char*>(a.A);
  uint32_t* flags = engineFlagsOf(dc, kPushFlagsOffset, rank, channel);
  const uint32_t sig = signatureOf(a, Form::EnginePushed, false, false, kPieceCols > 0 ? uint32_t(piecesPerShard) : 0);
  // FC_AGMM_ENGINE_PUSH=sm: the pushes by a kernel in front of the GEMM (shard_push.cu);
  // the copy queue then only fills a caller's Agathered.
  const bool bySm = a.enginePushBySm && a.enginePulls && piecesPerShard <= size_t(kMaxPushPieces);
  // FC_AGMM_AGATHERED=stages: the GEMM stores Agathered from its A stages (TMA: 16-byte
  // aligned); a choice of this rank's alone (the peers push the same either way).
  const bool fromStages =
      a.Agathered != nullptr && a.agatheredStages && reinterpret_cast<uintptr_t>(a.Agathered) % 16 == 0;
  const bool queue = !bySm || (a.Agathered != nullptr && !fromStages);
  ShardPush push;  // peers in the order they read us (rank - 1 first: we are its next shard)
  push.src = A;
  push.rows = shardRows;
  push.rowBytes = rowBytes;
  push.byColumns = kPieceCols > 0;
  push.pieceRows = pieceRows;
  push.pieceBytes = kPieceCols * es;
  push.pieces = int(piecesPerShard);
  push.ctas = tuning::kAgmmPushCtas;
  for (int t = 1; t < W; ++t, ++push.npeers) {
    const int s = (rank - t + W) % W;
    push.dst[push.npeers] = ce::slot(dc, s, channel, 0) + size_t(rank) * shardBytes;
    push.flag[push.npeers] = engineFlagsOf(dc, kPushFlagsOffset, s, channel) + rank;
  }
  FC_CHECK(launchOpBarrier(dc, channel, Op::AllGatherMatmul, sig, stream, /*letNextStart=*/true));
  if (queue) FC_CHECK(copies.after(stream, 0));
  if (bySm) FC_CHECK(launchShardPush(dc, channel, push, a.pdl, stream));
  for (int t = 0; t < push.npeers && !bySm; ++t)
    for (int c = 0; c < push.pieces; ++c) {
      const ShardPiece q = pieceOf(push, c);
      const size_t at = q.row0 * rowBytes + q.byte0;
      // Whole rows as one 1-D copy: the copy engine's (2-D copies evidently run on SMs).
      if (a.enginePulls && q.bytes == rowBytes)
        FC_CHECK(ce::copy(push.dst[t] + at, A + at, q.rows * rowBytes, copies.stream()));
      else if (a.enginePulls)
        FC_CHECK(ce::copy2D(push.dst[t] + at, A + at, rowBytes, q.bytes, q.rows, copies.stream()));
      FC_CHECK(copies.signal(push.flag[t], uint32_t(c + 1)));
    }
  if (a.Agathered != nullptr && !fromStages) {  // FC_AGMM_AGATHERED=beside (pushesShards)
    char* G = static_cast<char*>(a.Agathered);
    const char* landed = ce::slot(dc, rank, channel, 0);
    if (G + size_t(rank) * shardBytes != A)  // not in place
      FC_CHECK(ce::copy(G + size_t(rank) * shardBytes, A, shardBytes, copies.stream()));
    for (int t = 1; t < W; ++t) {  // rank + t pushes to us as its t-th peer
      const int s = (rank + t) % W;
      FC_CHECK(launchGate(dc, channel, Op::AllGatherMatmul, WaitKind::Shard, flags + s, uint32_t(piecesPerShard), s,
                          copies.stream()));
      FC_CHECK(ce::copy(G + size_t(s) * shardBytes, landed + size_t(s) * shardBytes, shardBytes, copies.stream()));
    }
  }
  if (queue) FC_CHECK(copies.mark(size_t(W)));
  if (a.engineAfterPulls)
    for (int s = 0; s < W; ++s)
      if (s != rank)
        FC_CHECK(launchGate(dc, channel, Op::AllGatherMatmul, WaitKind::Shard, flags + s, uint32_t(piecesPerShard), s,
                            stream));
  // Whether or not the GEMM launched, Q is waited for: a call that returned with pushes
  // in flight would let the caller change A under them.
  engine::EngineGemm g = engineGemm(dc, channel, a, ce::slot(dc, rank, channel, 0), shardRows, pieceRows,
                                    a.engineWaits ? flags : nullptr);
  g.ownA = A;
  if (fromStages) {
    g.storeA = a.Agathered;
    g.storeOwnA = static_cast<const char*>(a.Agathered) + size_t(rank) * shardBytes != A;  // not in place
  }
  g.ready.kPieceCols = int64_t(kPieceCols);
  g.pdl = a.pdl && !a.engineAfterPulls;
  const fcResult_t gemm = engine::launchAllGatherGemm(g, stream);
  if (queue) FC_CHECK(copies.waitMark(stream, size_t(W)));
  const fcResult_t barrier =
      a.engineWaits ? fcSuccess : launchOpBarrier(dc, channel, Op::AllGatherMatmul, sig, stream);
  FC_CUDA_CHECK(cudaMemsetAsync(flags, 0, size_t(W) * sizeof(uint32_t), stream));
  return gemm != fcSuccess ? gemm : barrier;
}

// The engine path (see the top): S stages our shard for the peers, meets them at the
// barrier, then puts our shard into its rows of the gathered buffer before the GEMM
// starts (after the barrier, so that the pulls, which start there, are not held back by
// this copy too; no copy when the workspace is the gathered buffer); Q pulls the others
// and flags each; one GEMM launch; then the flags are cleared for the next call.
// a.engineWaits / a.enginePulls false leave the waits / the pulls out
// (FC_AGMM_ENGINE_STAGES; timing only, see comm.h).
fcResult_t viaEngine(const DeviceComm& dc, int channel, CopyQueue& copies, const AllGatherMatmulArgs& a,
                     const SymSource* symA, char* gathered, cudaStream_t stream) {
  const int W = dc.nranks, rank = dc.rank;
  const size_t shardRows = a.M / size_t(W), shardBytes = shardRows * a.K * dataTypeSize(a.datatype);
  const bool inWorkspace = gatheredInWorkspace(dc, a, symA);
  if (inWorkspace) gathered = ce::slot(dc, rank, channel, 0);
  const size_t pieceRows = enginePieceRows(a, shardRows);
  const char* A = static_cast<const char*>(a.A);
  uint32_t* flags = shardFlags(dc, channel);
  char* ownRows = gathered + size_t(rank) * shardBytes;
  // A symmetric A whose shard is whole tile rows: the GEMM reads our rows in place
  // (own_rows_mainloop.cuh) and starts while the barrier waits (as viaEnginePush);
  // with a caller's Agathered our rows must still go there: in front of the GEMM, or
  // on Q beside it (FC_AGMM_AGATHERED=beside), after the pulls the GEMM waits for.
  const bool ownInPlace = symA != nullptr && (a.Agathered == nullptr || a.agatheredBeside) && ownRowsInPlace(dc, a);
  const bool pdl = ownInPlace && a.pdl && !a.engineAfterPulls;
  const uint32_t sig = signatureOf(a, Form::Engine, symA != nullptr, inWorkspace);
  FC_CHECK(stageAndPull(
      dc, channel, copies, a, symA, gathered, pieceRows, sig, stream,
      [&](int, int s, size_t c) { return copies.signal(flags + s, uint32_t(c + 1)); }, a.enginePulls, inWorkspace,
      pdl));
  if (!inWorkspace && !ownInPlace && ownRows != A) FC_CHECK(ce::copy(ownRows, A, shardBytes, stream));
  if (ownInPlace && a.Agathered != nullptr && ownRows != A)  // FC_AGMM_AGATHERED=beside
    FC_CHECK(ce::copy(ownRows, A, shardBytes, copies.stream()));
  FC_CHECK(copies.mark(size_t(W)));
  if (a.engineAfterPulls) FC_CHECK(copies.waitMark(stream, size_t(W)));
  // Whether or not the GEMM launched, the pulls are waited for, the flags cleared and
  // the final barrier passed: a call that left flags set would let the next call's
  // GEMM read shards that have not landed.
  engine::EngineGemm g =
      engineGemm(dc, channel, a, gathered, shardRows, pieceRows, a.engineWaits ? flags : nullptr);
  if (ownInPlace) g.ownA = A;
  g.pdl = pdl;
  const fcResult_t gemm = engine::launchAllGatherGemm(g, stream);
  FC_CHECK(copies.waitMark(stream, size_t(W)));
  // The GEMM has read every flag; the next call's pulls (ordered after this stream's
  // work by copies.after) set them again.
  FC_CUDA_CHECK(cudaMemsetAsync(flags, 0, size_t(W) * sizeof(uint32_t), stream));
  const fcResult_t barrier = launchOpBarrier(dc, channel, Op::AllGatherMatmul, sig, stream);
  return gemm != fcSuccess ? gemm : barrier;
}

}  // namespace

namespace {

const char* pathName(FusedAlgo p) {
  return p == FusedAlgo::Engine ? "engine" : p == FusedAlgo::Pipeline ? "pipeline" : "unfused";
}

}  // namespace

size_t allGatherMatmulScratch(const DeviceComm& dc, const AllGatherMatmulArgs& a) {
  return a.Agathered == nullptr && dc.nranks > 1 ? a.M * a.K * dataTypeSize(a.datatype) : 0;
}

fcResult_t launchAllGatherMatmul(const DeviceComm& dc, int channel, CopyQueue& copies, Gemm& gemm,
                                 const AllGatherMatmulArgs& a, const SymSource* symA, FusedAlgo choice,
                                 cudaStream_t stream) {
  const int W = dc.nranks, rank = dc.rank;
  const size_t es = dataTypeSize(a.datatype);
  const size_t shardRows = a.M / size_t(W), rowBytes = a.K * es, shardBytes = shardRows * rowBytes;
  const char* A = static_cast<const char*>(a.A);
  char* C = static_cast<char*>(a.C);
  const size_t cRowBytes = a.N * es;

  // Where the gathered rows go: Agathered, or the channel's scratch.
  char* gathered = static_cast<char*>(a.Agathered ? a.Agathered : a.scratch);

  if (W == 1) {
    if (a.Agathered != nullptr && a.Agathered != a.A) FC_CHECK(ce::copy(a.Agathered, A, shardBytes, stream));
    // The engine alone (every row is ours: nothing to wait for), as benchmarks compare it.
    if (choice == FusedAlgo::Engine) {
      const engine::EngineGemm solo = engineGemm(dc, channel, a, A, a.M, a.M, nullptr);
      if (engine::engineSupports(solo)) return engine::launchAllGatherGemm(solo, stream);
    }
    return gemm.matmul(A, a.M, a.B, a.C, a.N, a.K, a.transB, a.datatype, stream);
  }
  const bool zeroCopy = symA != nullptr;
  // Both fused paths stage our shard in a workspace slot (unless A is zero-copy); the
  // engine takes bf16 / fp16 with TMA-aligned rows only. A larger shard: the pipeline
  // in passes of rows (pipelineInPasses).
  const bool fits = zeroCopy || shardBytes <= ce::slotBytes(dc);
  tuning::AllGatherMatmulQuery q;
  q.forced = choice;
  q.nranks = W;
  q.gpuSms = a.gpuSms;
  q.engineSms = a.smCount;
  q.M = a.M;
  q.N = a.N;
  q.K = a.K;
  q.engineTakes = fits && engine::engineSupports(engineGemm(dc, channel, a, gathered, shardRows, shardRows, nullptr));
  q.pipelineFits = fits;
  q.pipelineInPasses = !fits && ce::slotBytes(dc) >= rowBytes;
  q.enginePushes = pushesShards(dc, a, symA);
  const FusedAlgo path = tuning::chooseAllGatherMatmul(q);
  const bool push = path == FusedAlgo::Engine && q.enginePushes;
  FC_TRACE("fcAllGatherMatmul: M %zu N %zu K %zu: %s%s%s", a.M, a.N, a.K, pathName(path),
           zeroCopy ? ", zero-copy" : "", push ? ", shards pushed" : "");
  if (push) return viaEnginePush(dc, channel, copies, a, stream);
  if (path == FusedAlgo::Engine) return viaEngine(dc, channel, copies, a, symA, gathered, stream);
  if (path == FusedAlgo::Unfused) return unfused(dc, channel, copies, gemm, a, symA, gathered, stream);
  // The pushed form also for a shard within a slot (one pass); a symmetric A's larger
  // shard "fits" only as zero-copy, and keeps the pulled form below.
  const bool pushedInOnePass = pushesPasses(dc, a) && shardBytes <= ce::slotBytes(dc);
  if (!fits || pushedInOnePass) return pipelineInPasses(dc, channel, copies, gemm, a, gathered, stream);

  const uint32_t sig = signatureOf(a, Form::Pipeline, zeroCopy);
  FC_CHECK(stageAndPull(dc, channel, copies, a, symA, gathered, shardRows, sig, stream,
                        [&](int t, int, size_t) { return copies.mark(size_t(t)); }));
  char* ownRows = gathered + size_t(rank) * shardBytes;
  const bool copyOwn = a.Agathered != nullptr && ownRows != A;
  if (copyOwn) FC_CHECK(ce::copy(ownRows, A, shardBytes, copies.stream()));
  FC_CHECK(copies.mark(size_t(W)));

  FC_CHECK(gemm.matmul(A, shardRows, a.B, C + size_t(rank) * shardRows * cRowBytes, a.N, a.K, a.transB,
                       a.datatype, stream));
  for (const Group& g : planGroups(W, rank, shardRows, a.N, a.K, shardBytes)) {
    const size_t s0 = size_t((rank + g.first) % W), rows = size_t(g.last - g.first + 1) * shardRows;
    FC_CHECK(copies.waitMark(stream, size_t(g.last)));
    FC_CHECK(gemm.matmul(gathered + s0 * shardBytes, rows, a.B, C + s0 * shardRows * cRowBytes, a.N, a.K,
                         a.transB, a.datatype, stream));
  }
  FC_CHECK(copies.waitMark(stream, size_t(W)));
  return launchOpBarrier(dc, channel, Op::AllGatherMatmul, sig, stream);
}

}  // namespace fc
