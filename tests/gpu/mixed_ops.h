// A reproducible mix of collectives for the GPU suite: all-reduces of one-shot and
// two-shot sizes, reduce-scatters and all-gathers, each on its own slices of shared
// input and output buffers, with the exact expected results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fc_data.h"
#include "fusedcomm.h"

inline int sumOverRanks(uint64_t seed, int nranks, size_t i) {
  int s = 0;
  for (int r = 0; r < nranks; ++r) s += fcPatternValue(seed, r, i);
  return s;
}

// One mixed op k: all-reduce (one- or two-shot size), reduce-scatter or all-gather,
// each on its own slices of shared in/out buffers.
struct MixedOps {
  struct OpDesc {
    int kind;  // 0 all-reduce, 1 reduce-scatter, 2 all-gather
    size_t count, inOff, outOff;
  };
  std::vector<OpDesc> ops;
  size_t inTotal = 0, outTotal = 0;
  MixedOps(size_t n, int W) {
    const size_t counts[] = {8, 1000, 24 * 1024, 3000, 4096};
    for (size_t k = 0; k < n; ++k) {
      // Every 20th op a bigger all-reduce: every 100th one of 1.06 MB (the Lamport
      // two-shot at 2 and 4 ranks), the others of 280 KB (the one-shot at 2 ranks).
      const bool big = k % 20 == 19;
      const int kind = big ? 0 : int(k % 3);
      const size_t c = !big ? counts[k % 5] : k % 100 == 99 ? 530000 : 140000;
      const size_t inN = kind == 1 ? W * c : c, outN = kind == 2 ? W * c : c;
      ops.push_back({kind, c, inTotal, outTotal});
      inTotal += (inN + 7) / 8 * 8;  // 16-byte aligned slices for bf16
      outTotal += (outN + 7) / 8 * 8;
    }
  }
  fcResult_t issue(const OpDesc& o, const char* in, char* out, fcComm_t comm, cudaStream_t s) const {
    const void* src = in + o.inOff * 2;
    void* dst = out + o.outOff * 2;
    if (o.kind == 0) return fcAllReduce(src, dst, o.count, fcBfloat16, fcSum, comm, s);
    if (o.kind == 1) return fcReduceScatter(src, dst, o.count, fcBfloat16, fcSum, comm, s);
    return fcAllGather(src, dst, o.count, fcBfloat16, comm, s);
  }
  // Wrong elements over all ops.
  size_t check(const std::vector<char>& out, uint64_t seed, int rank, int W) const {
    size_t bad = 0;
    for (const OpDesc& o : ops) {
      const char* got = out.data() + o.outOff * 2;
      for (size_t i = 0; i < (o.kind == 2 ? W * o.count : o.count); ++i) {
        int want;
        if (o.kind == 0) want = sumOverRanks(seed, W, o.inOff + i);
        else if (o.kind == 1) want = sumOverRanks(seed, W, o.inOff + size_t(rank) * o.count + i);
        else want = fcPatternValue(seed, int(i / o.count), o.inOff + i % o.count);
        bad += !(fcLoad(got, fcBfloat16, i) == float(want));
      }
    }
    return bad;
  }
};
