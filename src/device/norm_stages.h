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
};

// FC_ARNORM_CLUSTER_PACKS' default (collectives/allreduce_norm.cu): a row that one CTA's
// data threads take one pack each (up to 512 packs: hidden 4096 in bf16) in one CTA, a
// longer one over a cluster of CTAs of kNormAutoClusterPacks packs each. Measured on
// 2 H200s (fc-bench normstages, 2026-11-24): at hidden 4096 one CTA per row took
// 4.12-6.42 us at 1-64 tokens against 4.58-6.84 with clusters of 128 packs and
// 4.61-6.84 with 256; at 8192, clusters of 256 packs 5.29-8.73 against 5.43-8.70 (128)
// and 5.54-10.01 (one CTA: two packs per thread).
constexpr uint32_t kNormClusterPacksAuto = 0xffffffffu;
constexpr uint32_t kNormAutoClusterPacks = 256;

}  // namespace fc
