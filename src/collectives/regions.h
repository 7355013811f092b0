// How the region-based collectives (two-shot all-reduce, reduce-scatter,
// all-gather) cut a channel's workspace: `nregions` equal regions, each a whole
// number of chunks, and of maxCtas chunks when the workspace allows it: then every
// region starts at a chunk owned by CTA 0, and a call that touches n chunks per
// region needs only min(n, maxCtas) CTAs. Sizes beyond one region per rank run as
// several passes inside one kernel.
#pragma once

#include <cstddef>

#include "collectives/chunks.cuh"
#include "device/device_comm.h"

namespace fc {

struct RegionPlan {
  size_t regionBytes = 0;  // 0: the workspace is too small for this op
  unsigned grid = 0;
};

// `bytesPerRegion`: what one region would hold if the whole op fit in one pass.
inline RegionPlan planRegions(const DeviceComm& dc, int nregions, size_t bytesPerRegion) {
  RegionPlan p;
  const size_t perRegion = dc.workspaceBytes / size_t(nregions);
  const size_t group = dev::kChunkBytes * size_t(dc.maxCtas);
  p.regionBytes = perRegion >= group ? perRegion / group * group
                                     : perRegion / dev::kChunkBytes * dev::kChunkBytes;
  if (p.regionBytes == 0) return p;
  const size_t used = bytesPerRegion < p.regionBytes ? bytesPerRegion : p.regionBytes;
  const size_t chunks = (used + dev::kChunkBytes - 1) / dev::kChunkBytes;
  const bool aligned = p.regionBytes % group == 0;
  p.grid = unsigned(aligned && chunks < size_t(dc.maxCtas) ? (chunks > 0 ? chunks : 1) : size_t(dc.maxCtas));
  return p;
}

}  // namespace fc
