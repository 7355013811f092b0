// Fused GEMM + communication entry points: validate, then hand over to src/fused.
#include <algorithm>
#include <cstdint>

#include "api/gemm_call.h"
#include "comm/pointers.h"
#include "tuning/tuning.h"

namespace fc::api {

int engineSms(const fcComm* comm) {
  return comm->params.engineSms > 0 ? std::min(comm->smCount, comm->params.engineSms) : comm->smCount;
}

bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  const uintptr_t x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bn && y < x + an;
}

fcResult_t checkGemmArgs(const char* fn, const fcComm* comm, size_t M, size_t N, size_t K, fcOperation_t transB,
                         fcDataType_t datatype, const void* A, const void* B, const void* C, const void* extra,
                         bool rowsPerRank) {
  if (datatype != fcBfloat16 && datatype != fcFloat16)
    return fc::setError(fcInvalidArgument, "%s: datatype %d: use fcBfloat16 or fcFloat16", fn, int(datatype));
  if (transB != fcOpN && transB != fcOpT)
    return fc::setError(fcInvalidArgument, "%s: transB %d: use fcOpN or fcOpT", fn, int(transB));
  if (M == 0 || N == 0 || K == 0)
    return fc::setError(fcInvalidArgument, "%s: M, N and K must be > 0 (got %zu, %zu, %zu)", fn, M, N, K);
  const size_t lim = SIZE_MAX / 2;
  if (M > lim / K || M > lim / N || K > lim / N)
    return fc::setError(fcInvalidArgument, "%s: M, N, K = %zu, %zu, %zu are too large (their products overflow)",
                        fn, M, N, K);
  const size_t W = size_t(comm->nranks), es = fc::dataTypeSize(datatype);
  // Every matrix is at most [M, K], [K, N] or [M, N] (A: a shard or all of [M, K]; C:
  // [M, N] or a block of it), so these bounds hold each buffer; a shape beyond them
  // cannot be real, and the callers' overlap arithmetic relies on them.
  const struct {
    const char* name;
    const void* p;
    size_t elems;
  } bounds[] = {{"A", A, M * K}, {"B", B, K * N}, {"C", C, M * N}, {"Agathered", extra, M * K}};
  for (const auto& b : bounds)
    if (!fc::bufferFits(b.p, b.elems, es))
      return fc::setError(fcInvalidArgument,
                          "%s: M, N, K = %zu, %zu, %zu are too large: %s would span over 2^48 bytes or past the "
                          "end of the address space",
                          fn, M, N, K, b.name);
  if (rowsPerRank && M % W != 0)
    return fc::setError(fcInvalidArgument, "%s: M = %zu is not a multiple of nranks = %zu", fn, M, W);
  if (A == nullptr || B == nullptr || C == nullptr)
    return fc::setError(fcInvalidArgument, "%s: %s is NULL", fn, A == nullptr ? "A" : B == nullptr ? "B" : "C");
  for (const void* p : {A, B, C, extra})
    if (reinterpret_cast<uintptr_t>(p) % es)
      return fc::setError(fcInvalidArgument, "%s: buffers must be aligned to the element size (%zu)", fn, es);
  return fcSuccess;
}

fc::MatmulReduceScatterArgs matmulReduceScatterArgs(const fcComm* comm, const void* A, const void* B, void* C,
                                                    size_t M, size_t N, size_t K, fcOperation_t transB,
                                                    fcDataType_t datatype) {
  const size_t W = size_t(comm->nranks), cBytes = M / W * N * fc::dataTypeSize(datatype);
  const fc::MmrsEngineStages stages = comm->params.mmrsEngineStages;
  fc::MatmulReduceScatterArgs args;
  args.A = A;
  args.B = B;
  args.C = C;
  args.M = M;
  args.N = N;
  args.K = K;
  args.transB = transB;
  args.datatype = datatype;
  args.fp32Partials = comm->params.mmrsFp32Partials;
  args.smCount = engineSms(comm);
  args.gpuSms = comm->smCount;
  args.engineGates = stages == fc::MmrsEngineStages::Full || stages == fc::MmrsEngineStages::EpilogueAdd ||
                     stages == fc::MmrsEngineStages::NoPull;
  args.enginePulls = stages == fc::MmrsEngineStages::Full || stages == fc::MmrsEngineStages::EpilogueAdd ||
                     stages == fc::MmrsEngineStages::NoGate;
  const bool epilogueAdd = stages == fc::MmrsEngineStages::EpilogueAdd ||
                           stages == fc::MmrsEngineStages::EpilogueLocal || stages == fc::MmrsEngineStages::EpiloguePush;
  args.engineEpilogueAdd = epilogueAdd && (!comm->params.shareGpu || comm->params.engineSms > 0);
  args.engineLocalSource = stages == fc::MmrsEngineStages::EpilogueLocal;
  args.enginePushPartials = stages == fc::MmrsEngineStages::EpiloguePush;
  args.enginePieces = comm->params.mmrsEnginePieces;
  args.engineLead = comm->params.mmrsEngineLead;
  args.engineTileN = comm->params.mmrsEngineTileN;
  // C's bytes: one block of partials in the input type.
  args.lamportReduceScatter = fc::tuning::chooseReduceScatter(comm->nranks, comm->params.reduceScatterAlgo, cBytes,
                                                              W * cBytes) == fc::MoveAlgo::Lamport;
  args.pdl = comm->params.pdl;
  return args;
}

}  // namespace fc::api

using fc::api::checkGemmArgs;
using fc::api::engineSms;
using fc::api::overlaps;

FC_API fcResult_t fcAllGatherMatmul(const void* A, const void* B, void* C, void* Agathered, size_t M, size_t N,
                                    size_t K, fcOperation_t transB, fcDataType_t datatype, fcComm_t comm,
                                    cudaStream_t stream) {
  fc::clearError();
  const char* fn = "fcAllGatherMatmul";
  FC_CHECK(fc::checkComm(comm, fn));
  FC_CHECK(checkGemmArgs(fn, comm, M, N, K, transB, datatype, A, B, C, Agathered, true));
  const size_t W = size_t(comm->nranks), es = fc::dataTypeSize(datatype);
  const size_t aBytes = M / W * K * es, bBytes = K * N * es, cBytes = M * N * es, gBytes = M * K * es;
  const char* inPlaceA = Agathered ? static_cast<const char*>(Agathered) + size_t(comm->rank) * aBytes : nullptr;
  if (overlaps(C, cBytes, A, aBytes) || overlaps(C, cBytes, B, bBytes) ||
      (Agathered && (overlaps(C, cBytes, Agathered, gBytes) || overlaps(Agathered, gBytes, B, bBytes) ||
                     (A != inPlaceA && overlaps(Agathered, gBytes, A, aBytes)))))
    return fc::setError(fcInvalidArgument,
                        "%s: C, B and Agathered must not overlap each other or A (except A == Agathered + "
                        "rank*M/nranks*K, the in-place form)",
                        fn);
  FC_CHECK(fc::checkBuffers(comm, fn, {{"A", A}, {"B", B}, {"C", C}, {"Agathered", Agathered}}));
  fc::OpLane lane;
  FC_CHECK(fc::commOpBegin(comm, fn, stream, &lane));
  fc::SymSource src{};
  const bool zeroCopy = A != inPlaceA && fc::commSymmetricSource(comm, A, aBytes, &src) && src.offset % 16 == 0;
  const fc::FusedAlgo choice = comm->params.allGatherMatmulAlgo;
  fc::AllGatherMatmulArgs args;
  args.A = A;
  args.B = B;
  args.C = C;
  args.Agathered = Agathered;
  args.M = M;
  args.N = N;
  args.K = K;
  args.transB = transB;
  args.datatype = datatype;
  args.smCount = engineSms(comm);
  args.gpuSms = comm->smCount;
  args.engineAfterPulls = comm->params.shareGpu;
  args.pdl = comm->params.pdl;
  args.enginePieces = comm->params.agmmEnginePieces;
  args.engineKPieces = comm->params.agmmEngineKPieces;
  args.enginePushBySm = comm->params.agmmEnginePushBySm;
  args.engineTileN = comm->params.agmmEngineTileN;
  args.engineWaits = comm->params.agmmEngineStages != fc::EngineStages::NoWait;
  args.enginePulls = comm->params.agmmEngineStages != fc::EngineStages::NoPull;
  args.passes = comm->params.agmmPasses;
  args.agatheredBeside = comm->params.agmmAgatheredBeside;
  args.agatheredStages = comm->params.agmmAgatheredStages;
  args.symmetricPush = comm->params.agmmSymmetricPush;
  fcResult_t res = fc::commScratch(comm, fn, lane, fc::allGatherMatmulScratch(comm->dev, args), &args.scratch);
  const size_t c = size_t(lane.channel);
  if (res == fcSuccess)
    res = fc::launchAllGatherMatmul(comm->dev, lane.channel, *comm->copies[c], *comm->gemms[c], args,
                                    zeroCopy ? &src : nullptr, choice, stream);
  return fc::commOpEnd(comm, lane, stream, res);
}

FC_API fcResult_t fcMatmulReduceScatter(const void* A, const void* B, void* C, size_t M, size_t N, size_t K,
                                        fcOperation_t transB, fcDataType_t datatype, fcComm_t comm,
                                        cudaStream_t stream) {
  fc::clearError();
  const char* fn = "fcMatmulReduceScatter";
  FC_CHECK(fc::checkComm(comm, fn));
  FC_CHECK(checkGemmArgs(fn, comm, M, N, K, transB, datatype, A, B, C, nullptr, true));
  const size_t W = size_t(comm->nranks), es = fc::dataTypeSize(datatype);
  const size_t cBytes = M / W * N * es;
  if (overlaps(C, cBytes, A, M * K * es) || overlaps(C, cBytes, B, K * N * es))
    return fc::setError(fcInvalidArgument, "%s: C must not overlap A or B", fn);
  FC_CHECK(fc::checkBuffers(comm, fn, {{"A", A}, {"B", B}, {"C", C}}));
  fc::OpLane lane;
  FC_CHECK(fc::commOpBegin(comm, fn, stream, &lane));
  const fc::FusedAlgo choice = comm->params.matmulReduceScatterAlgo;
  fc::MatmulReduceScatterArgs args = fc::api::matmulReduceScatterArgs(comm, A, B, C, M, N, K, transB, datatype);
  fcResult_t res =
      fc::commScratch(comm, fn, lane, fc::matmulReduceScatterScratch(comm->dev, args, choice), &args.scratch);
  const size_t c = size_t(lane.channel);
  if (res == fcSuccess)
    res = fc::launchMatmulReduceScatter(comm->dev, lane.channel, *comm->copies[c], *comm->gemms[c], args, choice,
                                        stream);
  return fc::commOpEnd(comm, lane, stream, res);
}
