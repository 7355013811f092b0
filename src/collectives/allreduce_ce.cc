// Copy-engine all-reduce: the copy-engine reduce-scatter into our slice of
// recvbuff, then the copy-engine all-gather of the slices in place. Two-shot
// traffic (2(W-1)/W of the data per rank) moved by copy engines, which reach
// higher NVLink bandwidth than SM loads and stores (shared/baselines.md).
#include "collectives/collectives.h"
#include "core/datatype.h"
#include "core/result.h"

namespace fc {

fcResult_t launchAllReduceCe(const DeviceComm& dc, int channel, CopyQueue& copies, const void* sendbuff,
                             void* recvbuff, size_t count, fcDataType_t datatype, cudaStream_t stream) {
  const size_t n = count / size_t(dc.nranks);
  if (n * size_t(dc.nranks) != count)
    return setError(fcInternalError, "copy-engine all-reduce: count %zu is not a multiple of %d", count,
                    dc.nranks);
  char* slice = static_cast<char*>(recvbuff) + size_t(dc.rank) * n * dataTypeSize(datatype);
  FC_CHECK(launchReduceScatterCe(dc, channel, copies, sendbuff, slice, n, datatype, stream));
  return launchAllGatherCe(dc, channel, copies, slice, recvbuff, n, datatype, nullptr, stream);
}

}  // namespace fc
