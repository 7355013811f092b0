// fcMatmulAllReduce and its residual + RMSNorm forms (the row-parallel layer of
// tensor parallelism): validate, choose the path, launch. Three paths (docs/design.md,
// "GEMM + all-reduce"):
//   GEMV: decode rows in one kernel that streams the weight once and pushes each tile's
//     partial into the peers' Lamport buffers as soon as it is computed
//     (fused/gemv_all_reduce.cu); the norm forms then run the residual + RMSNorm kernel
//     on its unrounded fp32 sums (PDL);
//   all-reduce: the GEMM writes this rank's product where the all-reduce (+ norm) reads
//     it - C itself or normOut (then the all-reduce runs in place), or our own
//     workspace for the Lamport kernels, which read their input locally only - and
//     fcAllReduce's or fcAllReduceResidualRMSNorm's algorithm runs on it: no copy, no
//     scratch, the collective's kernel launched with PDL behind the GEMM (captured, with
//     an edge from the op's start too: comm/ops.cc, commDependOnStart);
//   reduce-scatter + all-gather: fcMatmulReduceScatter's path (its persistent engine at
//     2 ranks, where the reduce-scatter rides in the GEMM) sums this rank's block of
//     rows into the output, an in-place all-gather gives every rank every row, and the
//     norm forms add the residual and normalise locally.
//   decode engine (2 ranks, B^T, up to 256 rows in one wave of the decode GEMM's tiles
//     (three waves above 48 rows: tuning::decodeEngineTokens),
//     any K; forced only, FC_MMAR_ALGO=decode, until it is timed on 2 GPUs): the decode
//     GEMM stores each tile into our workspace and, in the same epilogue, into our slot
//     of the peer's Lamport Rows buffer (gemm/decode/push_epilogue.cuh);
//     fcAllReduceResidualRMSNorm's one kernel, launched with PDL behind it without its
//     push stage, sums the two in rank order into C (the plain form: its sum stage only)
//     or adds the residual and normalises too (the norm forms).
// Either way every rank gets the same bits: each element is summed in one place, in
// rank order, and rounded once (the Lamport kernels sum in rank order on every rank).
#include <algorithm>
#include <cstdint>

#include "api/collective_call.h"
#include "api/gemm_call.h"
#include "collectives/copy_engine.h"
#include "comm/pointers.h"
#include "device/norm_stages.h"
#include "gemm/decode/decode_gemm.h"
#include "tuning/tuning.h"

namespace fc::api {
namespace {

using MarPath = MatmulAllReducePath;

// One call of any of the three entry points.
struct MarCall {
  const char* fn;
  fcComm* comm;
  const void* A;
  const void* B;
  size_t M, N, K;
  fcOperation_t transB;
  fcDataType_t datatype;
  void* C;         // fcMatmulAllReduce's output; NULL for the norm forms
  NormCall* norm;  // the norm forms' arguments (norm->in is set here), or NULL
};

// The call's flags in its signature: B's layout, the norm, the path (bits 0-3; the
// reduce-scatter path adds bit 4: viaReduceScatter).
uint32_t pathFlags(const MarCall& m, MarPath path) {
  return uint32_t(m.transB) | (m.norm ? 2u : 0u) | (uint32_t(path) << 2);
}

// The decode kernel's arguments for the call (its output: C; for the norm forms fp32
// sums in our workspace, or with the norm inside the kernel the call's outputs).
GemvAllReduceArgs gemvArgs(const MarCall& m, int channel) {
  const fcComm* comm = m.comm;
  const bool inside = m.norm != nullptr && tuning::gemvNormInside(comm->params.gemvNorm);
  void* out = m.norm == nullptr ? m.C : inside ? nullptr : ce::slot(comm->dev, comm->rank, channel, 0);
  GemvAllReduceArgs g{m.A, m.B, out, m.M, m.N, m.K, m.transB, m.datatype, m.norm != nullptr && !inside,
                      comm->params.gemvForm, comm->params.gemvStages, comm->params.gemvRotate,
                      comm->params.gemvRowCopies, comm->params.gemvWarpsPerTile, comm->params.gemvPrefetch};
  if (inside) g.norm = m.norm;
  return g;
}

bool gemvFits(const MarCall& m, int channel) {
  const fcComm* comm = m.comm;
  const GemvAllReduceArgs g = gemvArgs(m, channel);
  return (!g.fp32Out || m.M * m.N * sizeof(float) <= ce::slotBytes(comm->dev)) && gemvAllReduceFits(comm->dev, g);
}

// FC_MMAR_ENGINE_STAGES (probe build, timing only): the stages that leave out every part
// but the engine's GEMM (gemm-only, and bare, which also drops the barriers).
bool gemmOnly(MmarEngineStages st) { return st == MmarEngineStages::GemmOnly || st == MmarEngineStages::Bare; }

// Where the plain form's C lies in symmetric memory (fcMemAlloc; its offset 16-byte
// aligned, for the peer's TMA stores): the peer's mapping of C, at 2 ranks, where the
// engine's gather stores our block's sums (MatmulReduceScatterArgs::gatherC); and the
// buffer's identity for the signature (which fcMemAlloc call, and the offset in it:
// ranks whose C lie elsewhere must meet a mismatch, not write into each other).
struct GatherIntoC {
  char* peerC = nullptr;
  uint64_t serial = 0, offset = 0;
};
GatherIntoC gatherIntoC(const MarCall& m) {
  GatherIntoC g;
  SymSource src{};
  if (m.norm != nullptr || m.comm->nranks != 2 ||
      !commSymmetricSource(m.comm, m.C, m.M * m.N * dataTypeSize(m.datatype), &src, &g.serial) || src.offset % 16 != 0)
    return g;
  g.peerC = const_cast<char*>(src.base) + size_t(1 - m.comm->rank) * src.stride + src.offset;
  g.offset = src.offset;
  return g;
}

// fcMatmulReduceScatter's arguments for the reduce-scatter path: our block of rows into
// our block of the sum buffer (C, or normOut), the engine's gather asked for
// (viaReduceScatter points it at the peer's C where C is symmetric).
MatmulReduceScatterArgs reduceScatterArgs(const MarCall& m) {
  fcComm* comm = m.comm;
  const size_t blockBytes = m.M / size_t(comm->nranks) * m.N * dataTypeSize(m.datatype);
  MatmulReduceScatterArgs args =
      matmulReduceScatterArgs(comm, m.A, m.B, nullptr, m.M, m.N, m.K, m.transB, m.datatype);
  char* sum = static_cast<char*>(m.norm == nullptr ? m.C : m.norm->out);  // the fp8 form: never here
  args.C = sum + size_t(comm->rank) * blockBytes;
  args.gatherToPeer = true;
  // FC_MMAR_ENGINE_STAGES (probe build, timing only: wrong results).
  const MmarEngineStages st = comm->params.mmarEngineStages;
  args.enginePeerStores = st != MmarEngineStages::Local && !gemmOnly(st);
  args.engineGatherSums = st != MmarEngineStages::NoGather && !gemmOnly(st);
  args.engineOwnWaits = st != MmarEngineStages::NoWait && !gemmOnly(st);
  args.engineBarriers = st != MmarEngineStages::Bare;
  args.engineTileN = comm->params.mmarEngineTileN;
  return args;
}

// The reduce-scatter path's choice of fcMatmulReduceScatter's algorithm.
FusedAlgo reduceScatterChoice(const fcComm* comm) {
  return comm->params.matmulAllReduceAlgo == MatmulAllReduceAlgo::Engine ? FusedAlgo::Engine : FusedAlgo::Auto;
}

// The decode engine's GEMM for the call (tokensPerTile 0: it does not take the shape:
// tuning::decodeEngineTokens, or the decode GEMM is off): its product, our own partial,
// into our workspace, where the finisher reads it; its pushes into our slot of the peer's
// Rows set, one per Lamport buffer.
decode::DecodeGemm decodeEngineGemm(const MarCall& m, int channel) {
  const fcComm* comm = m.comm;
  const int sms = comm->gemms[size_t(channel)]->decodeSms();
  decode::DecodeGemm g{m.A, m.B, ce::slot(comm->dev, comm->rank, channel, 0), m.M, m.N, m.K, m.datatype,
                       sms > 0 ? tuning::decodeEngineTokens(m.M, m.N, sms) : 0, sms};
  for (uint32_t b = 0; b < 3; ++b) g.push[b] = lamportRowsSlot(comm->dev, channel, b, 1 - comm->rank, comm->rank);
  g.pushIndex = lamportRowsIndex(comm->dev, channel);
  return g;
}

// The decode engine's finisher for the plain form: the all-reduce + RMSNorm's one kernel
// with its sum stage only (residualOut = the sum: C; no residual, no weight, no norm).
NormCall plainFinisher(const MarCall& m, const void* product) {
  return NormCall{product, nullptr, nullptr, m.C, nullptr, m.M, m.N, 0.f, m.datatype};
}

// The finisher's stages (device/norm_stages.h): never the push (the GEMM's epilogue
// pushed); the plain form sums only (each peer pack cleared once read, as in every call).
uint32_t finisherStages(const MarCall& m) {
  const uint32_t stages = m.comm->params.normStages & ~uint32_t(kNormPush);
  return m.norm != nullptr ? stages : stages & uint32_t(kNormSum | kNormReset | kNormPrefetch | kNormSolo);
}

// Whether the decode engine takes the call: 2 ranks, B^T, a shape its GEMM takes (and
// its buffers' alignment: a rank that cannot meets a mismatch, the path being in the
// signature), and one the all-reduce + RMSNorm's Lamport kernel takes, in our workspace
// and in a Rows slot (the plain form: C 16-byte aligned too, the kernel's stores being
// 16-byte packs).
bool decodeEngineFits(const MarCall& m, const Call& c) {
  const fcComm* comm = m.comm;
  if (comm->nranks != 2 || m.transB != fcOpT) return false;
  if (m.norm == nullptr && reinterpret_cast<uintptr_t>(m.C) % 16 != 0) return false;
  const size_t bytes = m.M * m.N * dataTypeSize(m.datatype);
  if (bytes > ce::slotBytes(comm->dev) || bytes > lamportSlotBytes(comm->nranks)) return false;
  const decode::DecodeGemm g = decodeEngineGemm(m, c.lane.channel);
  if (g.tokensPerTile == 0 || !decode::decodeGemmSupports(g)) return false;
  Call probe = c;
  NormCall n = m.norm != nullptr ? *m.norm : plainFinisher(m, g.D);
  n.in = g.D;
  NormPlan plan;
  return chooseNorm(probe, n, &plan) == fcSuccess && plan.path == NormPath::OneKernel;
}

// The path, the same on every rank (tuning::chooseMatmulAllReduce: FC_MMAR_ALGO where
// the shape allows it, else a function of the shape and the world size). The
// reduce-scatter splits rows, and the fp8 form needs a sum buffer of the input type,
// which only its all-reduce path has without more scratch.
MarPath choosePath(const MarCall& m, const Call& c) {
  const int channel = c.lane.channel;
  tuning::MatmulAllReduceQuery q;
  q.forced = m.comm->params.matmulAllReduceAlgo;
  q.nranks = m.comm->nranks;
  q.M = m.M, q.N = m.N, q.K = m.K;
  q.oneKernelFits = gemvFits(m, channel);
  q.maxCtas = m.comm->dev.maxCtas;
  q.rowsSplit = m.M % size_t(q.nranks) == 0 && (m.norm == nullptr || m.norm->out != nullptr);
  q.norm = m.norm != nullptr;
  // The shape's answer (as if every buffer were 16-byte aligned): the path must not
  // differ between ranks for one rank's alignment; viaReduceScatter catches a rank that
  // cannot gather with its buffers as a mismatch.
  q.engineGathers =
      q.rowsSplit && matmulReduceScatterGathers(m.comm->dev, reduceScatterArgs(m), reduceScatterChoice(m.comm), true);
  q.decodeEngineFits = q.forced == MatmulAllReduceAlgo::Decode && decodeEngineFits(m, c);
  q.decodeGemmSms = m.transB == fcOpT ? m.comm->gemms[size_t(channel)]->decodeSms() : 0;
  return tuning::chooseMatmulAllReduce(q);
}

// The decode path: one kernel, then (norm forms) the residual + RMSNorm on its fp32 sums,
// unless the kernel does it (FC_GEMV_NORM).
fcResult_t viaGemv(const MarCall& m, const Call& c, uint32_t sig, cudaStream_t stream) {
  const GemvAllReduceArgs g = gemvArgs(m, c.lane.channel);
  FC_CHECK(launchGemvAllReduce(m.comm->dev, c.lane.channel, g, sig, m.comm->params.pdl, stream));
  if (!g.fp32Out) return fcSuccess;
  return launchResidualNorm(*m.norm, g.out, m.comm->params.pdl, stream, true);
}

// Checks the norm forms add to the GEMM's (with tokens = M, hidden = N; c: the call
// as the collectives see it).
fcResult_t checkNorm(const MarCall& m, const Call& c, const NormCall& n) {
  const size_t es = dataTypeSize(m.datatype), bytes = m.M * m.N * es, aBytes = m.M * m.K * es, bBytes = m.K * m.N * es;
  if (n.outFp8 != nullptr && n.scale == nullptr) return setError(fcInvalidArgument, "%s: scale is NULL", m.fn);
  FC_CHECK(checkNormArgs(c, n));
  const void* out = n.outFp8 ? n.outFp8 : n.out;
  const size_t outBytes = n.outFp8 ? m.M * m.N : bytes;
  for (const void* in : {m.A, m.B})
    if (overlaps(out, outBytes, in, in == m.A ? aBytes : bBytes) ||
        overlaps(n.residualOut, bytes, in, in == m.A ? aBytes : bBytes))
      return setError(fcInvalidArgument, "%s: residualOut and normOut must not overlap A or B", m.fn);
  return fcSuccess;
}

// The GEMM `launch` enqueues in front of the op's collective, captured with the start edge
// that lets the collective launched behind it with PDL start early (comm/ops.cc,
// commDependOnStart).
template <class Launch>
fcResult_t gemmBeforeCollective(const MarCall& m, const Call& c, cudaStream_t stream, Launch&& launch) {
  FC_CHECK(commMarkStart(m.comm, c.lane, stream));
  FC_CHECK(launch());
  return commDependOnStart(m.comm, c.lane, stream);
}

// The all-reduce path's GEMM into `out` (fc::Gemm: cuBLASLt's or the decode GEMM).
fcResult_t productBeforeCollective(const MarCall& m, const Call& c, void* out, cudaStream_t stream) {
  return gemmBeforeCollective(m, c, stream, [&] {
    return m.comm->gemms[size_t(c.lane.channel)]->matmul(m.A, m.M, m.B, out, m.N, m.K, m.transB, m.datatype, stream);
  });
}

// The all-reduce path. The product goes where the collective reads it: C (in place);
// for the norm forms normOut (the unfused norm path, in place), or our own workspace
// for the Lamport all-reduce + RMSNorm kernel and its two-shot (they read their input
// locally and write only the outputs), or the channel's scratch where it does not fit
// half the workspace or the fp8 form's unfused path needs a sum buffer of the input
// type.
fcResult_t viaAllReduce(const MarCall& m, Call& c, uint32_t sig, cudaStream_t stream) {
  fcComm* comm = m.comm;
  const size_t bytes = m.M * m.N * dataTypeSize(m.datatype);
  c.sig = sig;
  if (m.norm == nullptr) {
    AllReduceAlgo algo;
    FC_CHECK(chooseAllReduce(c, &algo));
    // Ranks with another K (the same M x N) meet a different signature in the
    // all-reduce (c.sig: its Lamport call headers or its barriers).
    FC_CHECK(productBeforeCollective(m, c, m.C, stream));
    return launchAllReduce(c, algo, stream);
  }
  NormCall& n = *m.norm;
  NormPlan plan;
  FC_CHECK(chooseNorm(c, n, &plan));
  void* product = nullptr;
  if (plan.path == NormPath::Unfused && n.out != nullptr)
    product = n.out;
  else if (plan.path != NormPath::Unfused && bytes <= ce::slotBytes(comm->dev))
    product = ce::slot(comm->dev, comm->rank, c.lane.channel, 0);
  else
    FC_CHECK(commScratch(comm, m.fn, c.lane, bytes, &product));
  FC_CHECK(productBeforeCollective(m, c, product, stream));
  n.in = product;
  c.send = c.inPlaceSend = product;
  return launchNorm(c, n, plan, product, stream);
}

// The decode engine: the pushing decode GEMM, then the all-reduce + RMSNorm's Lamport
// kernel without its push stage (our product from our workspace, the peer's from our
// Rows buffer; the plain form with its sum stage only, into C), launched with PDL behind
// it with the op's start edge as the all-reduce path's collective (gemmBeforeCollective).
// Its call warp exchanges the call headers with the signature (a peer in another call or
// on another path is a mismatch), and its last CTA moves the Rows buffer index on, in
// step with the peer's.
fcResult_t viaDecodeEngine(const MarCall& m, Call& c, uint32_t sig, cudaStream_t stream) {
  fcComm* comm = m.comm;
  const decode::DecodeGemm g = decodeEngineGemm(m, c.lane.channel);
  FC_CHECK(gemmBeforeCollective(m, c, stream, [&] { return decode::launchDecodeGemm(g, stream); }));
  NormCall plain = plainFinisher(m, g.D);
  NormCall& n = m.norm != nullptr ? *m.norm : plain;
  n.in = g.D;
  c.sig = sig;
  c.send = c.inPlaceSend = g.D;
  return launchAllReduceNormLamport(comm->dev, c.lane.channel, n, comm->params.pdl, comm->params.normClusterPacks,
                                    comm->params.normWideCtas, comm->params.normRowCtas, finisherStages(m), stream,
                                    sig);
}

// The engine's all-gather (2 ranks): the peer's GEMM stored its block's sums into our
// workspace at that block's rows, complete once the op's final barrier has passed on
// our stream (matmulReduceScatterGathers); they go to the peer's rows of the output: a
// copy, or (norm forms) the residual + RMSNorm reading them in place; or, C being
// symmetric (intoC), the peer stored them into our C itself: nothing to do. They are read
// after that barrier, i.e. while the peer may already run its next call; safe because
// nothing writes into a rank's workspace before that rank has reached the call: every
// op that writes into a peer's workspace waits for an entry barrier first (this one's
// engine included).
fcResult_t gatheredRows(const MarCall& m, const Call& c, char* sum, bool intoC, cudaStream_t stream) {
  fcComm* comm = m.comm;
  const size_t es = dataTypeSize(m.datatype), blockRows = m.M / 2, blockBytes = blockRows * m.N * es;
  const size_t peer = size_t(1 - comm->rank);
  const char* peerSums = ce::slot(comm->dev, comm->rank, c.lane.channel, 0) + peer * blockBytes;
  if (m.norm == nullptr) {
    const MmarEngineStages st = comm->params.mmarEngineStages;  // probe build, timing only
    if (intoC || st == MmarEngineStages::NoCopy || gemmOnly(st)) return fcSuccess;
    FC_CUDA_CHECK(cudaMemcpyAsync(sum + peer * blockBytes, peerSums, blockBytes, cudaMemcpyDeviceToDevice, stream));
    return fcSuccess;
  }
  // The norm of each half of the rows from where its sums are: ours in place in
  // normOut, the peer's from our workspace.
  for (const size_t owner : {size_t(comm->rank), peer}) {
    NormCall half = *m.norm;
    const size_t offset = owner * blockBytes;
    half.tokens = blockRows;
    half.residual = static_cast<const char*>(half.residual) + offset;
    half.residualOut = static_cast<char*>(half.residualOut) + offset;
    half.out = static_cast<char*>(half.out) + offset;
    FC_CHECK(launchResidualNorm(half, owner == peer ? peerSums : sum + offset, comm->params.pdl, stream, false,
                                 comm->params.normLocalRows));
  }
  return fcSuccess;
}

// The reduce-scatter + all-gather path: fcMatmulReduceScatter's path into our block of
// the sum buffer (C or normOut; the fp8 form never comes here: choosePath), the
// all-gather in place, then (norm forms) the local residual + RMSNorm.
fcResult_t viaReduceScatter(const MarCall& m, Call& c, cudaStream_t stream) {
  fcComm* comm = m.comm;
  const size_t W = size_t(comm->nranks), es = dataTypeSize(m.datatype);
  const size_t blockElems = m.M / W * m.N;
  const size_t ch = size_t(c.lane.channel);
  const FusedAlgo choice = reduceScatterChoice(comm);
  MatmulReduceScatterArgs args = reduceScatterArgs(m);
  char* sum = static_cast<char*>(m.norm == nullptr ? m.C : m.norm->out);
  const bool gathered = matmulReduceScatterGathers(comm->dev, args, choice);
  // Whether we gather rests on our buffers' alignment (the engine reads and stores them
  // by TMA), so it is in the op's signature. Where the shape says the ranks gather and
  // ours cannot, a barrier with our signature goes first: it meets the peer's entry
  // barrier (gathering, its engine pushes behind one) and both ranks report the
  // mismatch at once, instead of waiting for tiles the other form never signals.
  // Its tile shape too (FC_MMAR_ENGINE_TILES may force one): ranks with different shapes
  // would count a piece's tiles differently and wait for each other until the deadline.
  const uint32_t tiles = gathered && matmulReduceScatterGatherTileN(comm->dev, args) == 256 ? 32u : 0u;
  // And whether its sums go straight into the peer's C (C symmetric): then which buffer
  // and where in it, so that ranks whose C differ meet a mismatch at the entry barrier
  // (their tiles then store nothing into each other: EpilogueSource::gatherMet).
  const GatherIntoC intoC = gathered ? gatherIntoC(m) : GatherIntoC{};
  args.gatherC = intoC.peerC;
  const uint64_t where = intoC.peerC != nullptr ? shapeKey(intoC.serial, intoC.offset, 1, 0) : 0;
  args.sig = opSignature(Op::MatmulAllReduce, uint32_t(m.datatype),
                         shapeKey(m.M, m.N, m.K,
                                  pathFlags(m, MarPath::ReduceScatterAllGather) | (gathered ? 16u : 0u) | tiles |
                                      (intoC.peerC != nullptr ? 64u : 0u)) ^
                             where);
  if (!gathered && matmulReduceScatterGathers(comm->dev, args, choice, true))
    FC_CHECK(launchOpBarrier(comm->dev, c.lane.channel, Op::MatmulReduceScatter, args.sig, stream));
  const size_t scratchBytes = matmulReduceScatterScratch(comm->dev, args, choice);
  if (scratchBytes > 0) FC_CHECK(commScratch(comm, m.fn, c.lane, scratchBytes, &args.scratch));
  FC_CHECK(launchMatmulReduceScatter(comm->dev, c.lane.channel, *comm->copies[ch], *comm->gemms[ch], args, choice,
                                     stream));
  if (gathered) return gatheredRows(m, c, sum, intoC.peerC != nullptr, stream);
  Call g{m.fn, comm, args.C, blockElems, sum, W * blockElems, args.C, m.datatype};
  g.elem = es;
  g.lane = c.lane;
  FC_CHECK(launchAllGather(g, stream));
  if (m.norm == nullptr) return fcSuccess;
  return launchResidualNorm(*m.norm, sum, comm->params.pdl, stream, false, comm->params.normLocalRows);
}

fcResult_t matmulAllReduce(MarCall& m, cudaStream_t stream) {
  fcComm* comm = m.comm;
  FC_CHECK(checkComm(comm, m.fn));
  const void* out = m.norm == nullptr ? m.C : m.norm->outFp8 != nullptr ? m.norm->outFp8 : m.norm->out;
  const char* outName = m.norm == nullptr ? "C" : m.norm->outFp8 != nullptr ? "normOutFp8" : "normOut";
  if (out == nullptr) return setError(fcInvalidArgument, "%s: %s is NULL", m.fn, outName);
  FC_CHECK(checkGemmArgs(m.fn, comm, m.M, m.N, m.K, m.transB, m.datatype, m.A, m.B, out, nullptr, false));
  const size_t es = dataTypeSize(m.datatype);
  // The all-reduce half as the collectives see it: M x N elements in place in the
  // output (the paths point it at the product's buffer).
  Call c{m.fn, comm, out, m.M * m.N, const_cast<void*>(out), m.M * m.N, out, m.datatype, "M * N", outName};
  c.elem = es;
  if (m.norm == nullptr) {
    if (overlaps(m.C, m.M * m.N * es, m.A, m.M * m.K * es) || overlaps(m.C, m.M * m.N * es, m.B, m.K * m.N * es))
      return setError(fcInvalidArgument, "%s: C must not overlap A or B", m.fn);
    FC_CHECK(checkBuffers(comm, m.fn, {{"A", m.A}, {"B", m.B}, {"C", m.C}}));
  } else {
    FC_CHECK(checkNorm(m, c, *m.norm));
    const NormCall& n = *m.norm;
    FC_CHECK(checkBuffers(comm, m.fn,
                          {{"A", m.A}, {"B", m.B}, {"residual", n.residual}, {"weight", n.weight},
                           {"residualOut", n.residualOut}, {outName, out}, {"scale", n.scale}}));
  }
  FC_CHECK(commOpBegin(comm, m.fn, stream, &c.lane));
  const MarPath path = choosePath(m, c);
  if (comm->nranks == 1 && path == MarPath::AllReduce) {
    fcResult_t res = fcSuccess;
    if (m.norm == nullptr) {
      res = comm->gemms[size_t(c.lane.channel)]->matmul(m.A, m.M, m.B, m.C, m.N, m.K, m.transB, m.datatype, stream);
    } else {
      // One rank: the product is the sum; the residual + RMSNorm runs on it locally.
      void* sum = m.norm->out;
      if (sum == nullptr) res = commScratch(comm, m.fn, c.lane, m.M * m.N * es, &sum);
      if (res == fcSuccess)
        res = comm->gemms[size_t(c.lane.channel)]->matmul(m.A, m.M, m.B, sum, m.N, m.K, m.transB, m.datatype, stream);
      if (res == fcSuccess)
        res = launchResidualNorm(*m.norm, sum, comm->params.pdl, stream, false, comm->params.normLocalRows);
    }
    return commOpEnd(comm, c.lane, stream, res);
  }
  // The path is part of the signature: it is the same on every rank for the same shape,
  // except where one rank's buffers are not 16-byte aligned and the one kernel cannot
  // take them there; such ranks then meet a mismatch at once instead of waiting for
  // data in another protocol's buffers until the deadline.
  const uint32_t sig = opSignature(Op::MatmulAllReduce, uint32_t(m.datatype), shapeKey(m.M, m.N, m.K, pathFlags(m, path)));
  FC_TRACE("%s: M %zu N %zu K %zu: %s", m.fn, m.M, m.N, m.K,
           path == MarPath::OneKernel      ? "GEMV + all-reduce kernel"
           : path == MarPath::AllReduce    ? "GEMM, then the all-reduce"
           : path == MarPath::DecodeEngine ? "decode engine: the GEMM pushing, the Lamport rows kernel finishing"
                                           : "reduce-scatter from the GEMM, all-gather");
  const fcResult_t res = path == MarPath::OneKernel      ? viaGemv(m, c, sig, stream)
                         : path == MarPath::AllReduce    ? viaAllReduce(m, c, sig, stream)
                         : path == MarPath::DecodeEngine ? viaDecodeEngine(m, c, sig, stream)
                                                         : viaReduceScatter(m, c, stream);
  return commOpEnd(comm, c.lane, stream, res);
}

}  // namespace
}  // namespace fc::api

FC_API fcResult_t fcMatmulAllReduce(const void* A, const void* B, void* C, size_t M, size_t N, size_t K,
                                    fcOperation_t transB, fcDataType_t datatype, fcComm_t comm,
                                    cudaStream_t stream) {
  fc::clearError();
  fc::api::MarCall m{"fcMatmulAllReduce", comm, A, B, M, N, K, transB, datatype, C, nullptr};
  return fc::api::matmulAllReduce(m, stream);
}

FC_API fcResult_t fcMatmulAllReduceResidualRMSNorm(const void* A, const void* B, const void* residual,
                                                   const void* weight, void* residualOut, void* normOut, size_t M,
                                                   size_t N, size_t K, float eps, fcOperation_t transB,
                                                   fcDataType_t datatype, fcComm_t comm, cudaStream_t stream) {
  fc::clearError();
  fc::NormCall n{nullptr, residual, weight, residualOut, normOut, M, N, eps, datatype};
  fc::api::MarCall m{"fcMatmulAllReduceResidualRMSNorm", comm, A, B, M, N, K, transB, datatype, nullptr, &n};
  return fc::api::matmulAllReduce(m, stream);
}

FC_API fcResult_t fcMatmulAllReduceResidualRMSNormFp8(const void* A, const void* B, const void* residual,
                                                      const void* weight, void* residualOut, void* normOutFp8,
                                                      const float* scale, size_t M, size_t N, size_t K, float eps,
                                                      fcOperation_t transB, fcDataType_t datatype, fcComm_t comm,
                                                      cudaStream_t stream) {
  fc::clearError();
  fc::NormCall n{nullptr, residual, weight, residualOut, nullptr, M, N, eps, datatype, normOutFp8, scale};
  fc::api::MarCall m{"fcMatmulAllReduceResidualRMSNormFp8", comm, A, B, M, N, K, transB, datatype, nullptr, &n};
  return fc::api::matmulAllReduce(m, stream);
}
