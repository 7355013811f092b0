// Copy-engine all-gather (the copy-engine gather of torch symm_mem's fused_all_gather_matmul). Per pass p of up to
// passElems elements per rank, in workspace slot p % S (S = ce::kSlots):
//
//   stage(p):  on the caller's stream, our block of the pass into our slot p
//              (skipped when zero-copy: peers read our symmetric sendbuff where it
//              is, in one pass);
//   barrier p: every rank staged pass p and, having waited for its pulls(p-S+1)
//              first, no longer reads slot (p+1) % S of anyone;
//   pulls(p):  on the copy queue, at time t = 1..W-1 rank r+t's block from its slot
//              into our recvbuff (rank-rotated: no rank is everybody's first source).
//   Then stage(p+1) into slot (p+1) % S, free everywhere by barrier p.
//
// Our own block goes to recvbuff on the caller's stream while the last pulls move
// (out of place). A final barrier after our last pulls: when the call completes on
// any rank, no peer still reads its workspace (the next op's kernels write it
// without asking) or its sendbuff.
#include <algorithm>

#include "collectives/collectives.h"
#include "collectives/copy_engine.h"
#include "core/datatype.h"
#include "core/result.h"

namespace fc {

fcResult_t launchAllGatherCe(const DeviceComm& dc, int channel, CopyQueue& copies, const void* sendbuff,
                             void* recvbuff, size_t sendcount, fcDataType_t datatype,
                             const SymSource* symmetricIn, cudaStream_t stream) {
  const int W = dc.nranks, rank = dc.rank;
  const size_t es = dataTypeSize(datatype);
  const size_t passBytes = ce::slotBytes(dc);
  if (passBytes == 0)
    return setError(fcInvalidUsage, "all-gather: a workspace of %llu bytes is too small",
                    (unsigned long long)dc.workspaceBytes);
  const bool stage = symmetricIn == nullptr;
  const size_t passElems = stage ? passBytes / es : sendcount;
  const size_t passes = (sendcount + passElems - 1) / passElems;
  const uint32_t sig = opSignature(Op::AllGatherCe, uint32_t(datatype), sendcount);
  const char* send = static_cast<const char*>(sendbuff);
  char* recv = static_cast<char*>(recvbuff);
  const bool inPlace = send == recv + size_t(rank) * sendcount * es;

  auto source = [&](int r, size_t p) -> const char* {
    if (stage) return ce::slot(dc, r, channel, p);
    return symmetricIn->base + size_t(r) * symmetricIn->stride + symmetricIn->offset;
  };
  auto stageIn = [&](size_t p) -> fcResult_t {
    const size_t seg0 = p * passElems, n = std::min(passElems, sendcount - seg0);
    return stage ? ce::copy(ce::slot(dc, rank, channel, p), send + seg0 * es, n * es, stream) : fcSuccess;
  };

  constexpr size_t S = ce::kSlots;
  FC_CHECK(stageIn(0));
  for (size_t p = 0; p < passes; ++p) {
    const size_t seg0 = p * passElems, n = std::min(passElems, sendcount - seg0);
    if (p + 1 >= S) FC_CHECK(copies.waitMark(stream, p + 1 - S));
    FC_CHECK(launchOpBarrier(dc, channel, Op::AllGatherCe, sig, stream));
    FC_CHECK(copies.after(stream, p));
    for (int t = 1; t < W; ++t) {
      const int s = (rank + t) % W;
      FC_CHECK(ce::copy(recv + (size_t(s) * sendcount + seg0) * es, source(s, p), n * es, copies.stream()));
    }
    FC_CHECK(copies.mark(p));
    if (p + 1 < passes) FC_CHECK(stageIn(p + 1));
  }
  if (!inPlace)
    FC_CHECK(ce::copy(recv + size_t(rank) * sendcount * es, send, sendcount * es, stream));
  FC_CHECK(copies.waitMark(stream, passes - 1));  // the queue is in order: all pulls
  return launchOpBarrier(dc, channel, Op::AllGatherCe, sig, stream);
}

}  // namespace fc
