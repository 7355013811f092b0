// How many thread block clusters of a launch the device holds at once (launch.h).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>

#include "collectives/launch.h"

namespace fc {
namespace {

// Answers so far, per (device, kernel, cluster, threads, shared memory): a kernel's
// residency never changes, and the query is a driver call that the launch paths of the
// small collectives should not repeat (eager calls pay their host time). A fixed table,
// no allocation on a call path; once full, further shapes are queried each time.
struct Entry {
  int device;
  const void* kernel;
  unsigned cluster, threads;
  size_t smem, clusters;
};
constexpr int kEntries = 128;
std::mutex gMutex;
Entry gEntries[kEntries];
int gUsed = 0;

}  // namespace

fcResult_t residentClustersOf(const void* kernel, unsigned cluster, unsigned threads, size_t smem, size_t* clusters) {
  int device = 0;
  FC_CUDA_CHECK(cudaGetDevice(&device));
  {
    std::lock_guard<std::mutex> lock(gMutex);
    for (int i = 0; i < gUsed; ++i) {
      const Entry& e = gEntries[i];
      if (e.device == device && e.kernel == kernel && e.cluster == cluster && e.threads == threads && e.smem == smem) {
        *clusters = e.clusters;
        return fcSuccess;
      }
    }
  }
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(cluster);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.attrs = &attr;
  config.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &config) != cudaSuccess) {
    // No answer (a runtime that refuses the query, e.g. in a capture mode that forbids it):
    // the launch goes ahead as before this check, every cluster taken as resident, and the
    // error this query left for cudaGetLastError is taken back. Not cached: asked again.
    (void)cudaGetLastError();
    *clusters = SIZE_MAX;
    return fcSuccess;
  }
  *clusters = n > 0 ? size_t(n) : 1;
  std::lock_guard<std::mutex> lock(gMutex);
  if (gUsed < kEntries) gEntries[gUsed++] = {device, kernel, cluster, threads, smem, *clusters};
  return fcSuccess;
}

}  // namespace fc
