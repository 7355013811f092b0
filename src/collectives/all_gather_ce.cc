// Copy-engine all-gather (seed 003's copy-engine gather). Per pass p of up to
// passElems elements per rank, double-buffered in the two workspace slots:
//
//   stage(p):  our block of the pass into our slot p%2 (skipped when zero-copy:
//              peers then read our symmetric sendbuff where it is);
//   barrier p: every rank staged pass p, and (joined before it) finished the pulls
//              of pass p-1;
//   pulls(p):  at time t = 1..W-1 copy rank r+t's block from its slot into our
//              recvbuff (rank-rotated, so that no rank is everybody's first source),
//              on the copy streams; meanwhile, on the caller's stream, our own block
//              into recvbuff (out of place) and stage(p+1) into slot (p+1)%2, whose
//              pulls (pass p-1) barrier p proved finished everywhere.
//
// A final barrier: when the call completes on any rank, no peer still reads its
// workspace (the next op's kernels write it without asking) or its sendbuff.
#include <algorithm>

#include "collectives/collectives.h"
#include "collectives/copy_engine.h"
#include "core/datatype.h"
#include "core/result.h"

namespace fc {

fcResult_t launchAllGatherCe(const DeviceComm& dc, int channel, StreamFork& copies, int nCopyStreams,
                             const void* sendbuff, void* recvbuff, size_t sendcount,
                             fcDataType_t datatype, const SymSource* symmetricIn, cudaStream_t stream) {
  const int W = dc.nranks, rank = dc.rank;
  const size_t es = dataTypeSize(datatype);
  const size_t passBytes = ce::slotBytes(dc);
  if (passBytes == 0)
    return setError(fcInvalidUsage, "all-gather: a workspace of %llu bytes is too small",
                    (unsigned long long)dc.workspaceBytes);
  const bool stage = symmetricIn == nullptr;
  // Zero-copy has no slots: one pass.
  const size_t passElems = stage ? passBytes / es : sendcount;
  const size_t passes = (sendcount + passElems - 1) / passElems;
  const int nStreams = std::max(1, std::min(nCopyStreams, W - 1));
  const uint32_t sig = opSignature(Op::AllGatherCe, uint32_t(datatype), sendcount);
  const char* send = static_cast<const char*>(sendbuff);
  char* recv = static_cast<char*>(recvbuff);
  const bool inPlace = send == recv + size_t(rank) * sendcount * es;

  auto source = [&](int r, size_t p) -> const char* {
    if (stage) return ce::slot(dc, r, channel, p);
    return symmetricIn->base + size_t(r) * symmetricIn->stride + symmetricIn->offset + p * passElems * es;
  };
  auto stageIn = [&](size_t p) -> fcResult_t {
    const size_t seg0 = p * passElems, n = std::min(passElems, sendcount - seg0);
    return stage ? ce::copy(ce::slot(dc, rank, channel, p), send + seg0 * es, n * es, stream) : fcSuccess;
  };

  FC_CHECK(stageIn(0));
  for (size_t p = 0; p < passes; ++p) {
    const size_t seg0 = p * passElems, n = std::min(passElems, sendcount - seg0);
    FC_CHECK(launchOpBarrier(dc, channel, Op::AllGatherCe, sig, stream));
    FC_CHECK(copies.fork(stream, nStreams));
    for (int t = 1; t < W; ++t) {
      const int s = (rank + t) % W;
      FC_CHECK(ce::copy(recv + (size_t(s) * sendcount + seg0) * es, source(s, p), n * es,
                        copies.stream((t - 1) % nStreams)));
    }
    if (!inPlace)
      FC_CHECK(ce::copy(recv + (size_t(rank) * sendcount + seg0) * es, send + seg0 * es, n * es, stream));
    if (p + 1 < passes) FC_CHECK(stageIn(p + 1));
    FC_CHECK(copies.join(stream, nStreams));
  }
  return launchOpBarrier(dc, channel, Op::AllGatherCe, sig, stream);
}

}  // namespace fc
