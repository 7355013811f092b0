// The stages of the all-reduce + RMSNorm Lamport kernel (collectives/allreduce_norm.cu),
// for timing where its time goes (FC_ARNORM_STAGES; fc-bench normstages). Every real
// call runs kNormFull. Leaving kNormPrefetch out changes only when loads are issued
// (results stay right); every other set leaves stages out: wrong results, and the
// communicator is fit only for more such calls.
#pragma once

#include <cstdint>

namespace fc {

enum NormStage : uint32_t {
  kNormPush = 1,       // push our rows into every peer's buffer
  kNormSum = 2,        // per row: poll the peers' packs, sum in rank order, store residualOut
  kNormResidual = 4,   // with kNormSum: add the residual (else residualOut is the sum)
  kNormNorm = 8,       // with kNormSum: the row's mean square, the normed rows stored
  kNormReset = 16,     // clear each peer pack once read (for the call three later)
  kNormPrefetch = 32,  // load each thread's residual and weight packs of a row (the
                       // first kKeep) before polling for the peers' packs, not after
  kNormFull = kNormPush | kNormSum | kNormResidual | kNormNorm | kNormReset | kNormPrefetch,
  // With kNormFull: the production kernel launched one CTA an SM (unused dynamic shared
  // memory, collectives/launch.h soloSmem), so that the next call's CTAs, launched early
  // under PDL, do not share SMs with ours (as FC_LAMPORT_STAGES=solo; device_comm.h).
  kNormSolo = 64,
  // With kNormFull: per-CTA phase stamps (collectives/lamport_timeline.cuh): pushes issued,
  // first pack summed, first row done, last row done; a "# timeline norm" line every few
  // calls (a measurement form, a kernel instantiation of its own: 2.5-3.5 us a call more
  // than full, so read its spans, not its time).
  kNormTimeline = 128,
  // With kNormFull: every row through the row loop with its local-memory arrays, also
  // where a thread holds one pack of the row (norm_rows.cuh normRow: the one-pack path).
  kNormLoopRow = 256,
  // With kNormFull: nothing left out, but the measured kernel (stages at run time)
  // instead of the production one, to compare with kNormLoopRow on the same kernel.
  kNormMeasured = 512,
};

// FC_ARNORM_CLUSTER_PACKS unset: the default, tuning::normClusterPacks (one CTA while
// its data threads, or a wide CTA's up to 640, hold the row one pack each, else clusters
// of the table's packs).
constexpr uint32_t kNormClusterPacksAuto = 0xffffffffu;

}  // namespace fc
