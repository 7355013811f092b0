// fc-bench arnorm: fcAllReduceResidualRMSNorm against the all-reduce alone and the
// unfused sequence, in one run (graph replays timed interleaved, nccl-tests' per-call
// convention: a graph of -n calls, median replay / n, max over ranks).
//
// Columns per (tokens, hidden):
//   fused_us        fcAllReduceResidualRMSNorm (the communicator's default: PDL on)
//   fused_nopdl_us  the same without programmatic dependent launch (FC_PDL=0)
//   unfused_us      fcAllReduce, then our residual + RMSNorm kernel (FC_ARNORM_ALGO=unfused)
//   forced_us       FC_ARNORM_ALGO=fused: one kernel up to the push slot, the two-shot
//                   kernel above it at every size (auto stops it at 16 MiB)
//   unaligned_us    forced, the two-shot kernel's passes as full as the slot allows
//                   (FC_ARNORM_PASS_ALIGN=0)
//   gather_us       forced, the two-shot kernel's all-gather in sets of its own
//                   (FC_ARNORM_GATHER_SET=1: passes twice as long)
//   narrow_us       fused, the one kernel's CTAs kept at 512 data threads where a
//                   share of a row is longer (FC_ARNORM_WIDE_CTAS=0)
//   twoshot_us      the two-shot kernel from the first byte (FC_ARNORM_ALGO=twoshot;
//                   the unfused path where it does not run), beside forced: the
//                   crossover of the two kernels
//   allreduce_us    fcAllReduce alone, same buffer
//   nccl_us         ncclAllReduce alone (when NCCL loads; the norm not included: the
//                   Python benchmark adds torch's)
//   over_ar_us      fused_us - allreduce_us: what the residual and the norm cost
//   speedup         unfused_us / fused_us
//   eager_us        fused, one call + synchronize (median, wall)
//   maxerr, check   residualOut exact (integer inputs), normOut within 2^-7 relative
//                   of the float64 norm of the returned residualOut
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bench.h"
#include "fc_data.h"

int benchArnorm(Ctx& c, const Options& o, const std::string& tokensList, const std::string& hiddenList) {
  const fcDataType_t type = parseType(o.dtype);
  const size_t es = fcTypeSize(type);
  const std::vector<size_t> tokensV = parseList(tokensList), hiddenV = parseList(hiddenList);
  const size_t maxElems = *std::max_element(tokensV.begin(), tokensV.end()) *
                          *std::max_element(hiddenV.begin(), hiddenV.end());
  std::string why;
  const bool haveNccl = o.nccl && (c.ncclComm != nullptr || initNccl(c, &why));
  fcComm_t noPdl = commWithEnv(c, "FC_PDL", "0");
  fcComm_t unfused = commWithEnv(c, "FC_ARNORM_ALGO", "unfused");
  fcComm_t forced = commWithEnv(c, "FC_ARNORM_ALGO", "fused");
  fcComm_t narrow = commWithEnv(c, "FC_ARNORM_WIDE_CTAS", "0");
  fcComm_t twoShot = commWithEnv(c, "FC_ARNORM_ALGO", "twoshot");
  // The two-shot kernel's pass forms, forced as `forced` is (commWithEnv sets one variable).
  fcComm_t unaligned, gather;
  {
    ScopedEnv fused("FC_ARNORM_ALGO", "fused");
    unaligned = commWithEnv(c, "FC_ARNORM_PASS_ALIGN", "0");
    gather = commWithEnv(c, "FC_ARNORM_GATHER_SET", "1");
  }
  void *in, *res, *w, *resOut, *out;
  CUDA_OK(cudaMalloc(&in, maxElems * es));
  CUDA_OK(cudaMalloc(&res, maxElems * es));
  CUDA_OK(cudaMalloc(&resOut, maxElems * es));
  CUDA_OK(cudaMalloc(&out, maxElems * es));
  CUDA_OK(cudaMalloc(&w, *std::max_element(hiddenV.begin(), hiddenV.end()) * es));
  if (c.rank == 0) {
    printf("# fc-bench arnorm: %s, %s, graph of %d calls, %d replays (median, interleaved), %d warm-up; NCCL: %s\n",
           describeRun(c).c_str(), o.dtype.c_str(), o.iters, o.replays, o.warmup,
           describeNccl(c, haveNccl, why).c_str());
    printf("op,tokens,hidden,bytes,type,fused_us,fused_nopdl_us,unfused_us,allreduce_us,nccl_us,over_ar_us,speedup,"
           "eager_us,maxerr,check,forced_us,unaligned_us,gather_us,narrow_us,twoshot_us\n");
  }
  int failures = 0;
  for (size_t hidden : hiddenV) {
    for (size_t tokens : tokensV) {
      const size_t n = tokens * hidden, bytes = n * es;
      // Integer inputs: the rank sum and the residual add are exact in every dtype.
      const NormInputs ni = uploadNormInputs(c, type, tokens, hidden, in, res, w);
      const uint64_t seed = ni.seed;
      const std::vector<char>& hr = ni.residual;
      const std::vector<char>& hw = ni.weight;
      CUDA_OK(cudaMemsetAsync(out, 0xff, bytes, c.stream));
      CUDA_OK(cudaMemsetAsync(resOut, 0xff, bytes, c.stream));
      auto call = [&](fcComm_t comm) {
        return [&, comm] {
          FC_OK(fcAllReduceResidualRMSNorm(in, res, w, resOut, out, tokens, hidden, 1e-6f, type, comm, c.stream));
        };
      };
      call(c.comm)();
      std::vector<char> gotRes(bytes), got(bytes);
      CUDA_OK(cudaMemcpyAsync(gotRes.data(), resOut, bytes, cudaMemcpyDeviceToHost, c.stream));
      CUDA_OK(cudaMemcpyAsync(got.data(), out, bytes, cudaMemcpyDeviceToHost, c.stream));
      CUDA_OK(cudaStreamSynchronize(c.stream));
      double err = 0;
      for (size_t t = 0; t < tokens; ++t) {
        double ss = 0;
        for (size_t k = 0; k < hidden; ++k) {
          const size_t i = t * hidden + k;
          double want = fcLoad(hr.data(), type, i);
          for (int r = 0; r < c.nranks; ++r) want += fcPatternValue(seed, r, i);
          const double x = fcLoad(gotRes.data(), type, i);
          const double e = std::fabs(x - want);
          if (!(e <= err)) err = std::isnan(e) ? 1e30 : e;
          ss += x * x;
        }
        const double rstd = 1.0 / std::sqrt(ss / double(hidden) + 1e-6);
        for (size_t k = 0; k < hidden; ++k) {
          const size_t i = t * hidden + k;
          const double want = fcLoad(gotRes.data(), type, i) * rstd * fcLoad(hw.data(), type, k);
          const double e = std::fabs(fcLoad(got.data(), type, i) - want) / std::max(std::fabs(want), 1e-3);
          if (!(e <= 0x1p-7)) err = std::max(err, std::isnan(e) ? 1e30 : e);
        }
      }
      auto ar = [&] { FC_OK(fcAllReduce(in, out, n, type, fcSum, c.comm, c.stream)); };
      // forced, its pass forms, narrow and twoshot go last, after NCCL, so that the columns
      // keep their indices; they write the same outputs, which the check above has read already.
      std::vector<std::function<void()>> ops = {call(c.comm), call(noPdl), call(unfused), ar};
      if (haveNccl)
        ops.push_back([&] {
          if (int r = c.nccl.allReduce(in, out, n, int(type), 0, c.ncclComm, c.stream); r != 0) {
            fprintf(stderr, "fc-bench: NCCL call failed: %s\n", c.nccl.getErrorString(r));
            exit(1);
          }
        });
      for (fcComm_t comm : {forced, unaligned, gather, narrow, twoShot}) ops.push_back(call(comm));
      std::vector<double> us = timeGraphsMax(c, o, ops);
      const EagerTimes eager = o.eager ? timeEager(c, o, call(c.comm)) : EagerTimes{};
      const double worstErr = maxOverRanks(c, err);
      // Exact residualOut (0) and normOut within 2^-7 (the check above keeps err there).
      const bool ok = worstErr <= 0x1p-7;
      failures += !ok;
      if (c.rank == 0) {
        const size_t last = us.size() - 1;
        printf("arnorm,%zu,%zu,%zu,%s,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,%.2f,%g,%s,%.2f,%.2f,%.2f,%.2f,%.2f\n",
               tokens, hidden, bytes, fcTypeName(type), us[0], us[1], us[2], us[3], haveNccl ? us[4] : 0.0,
               us[0] - us[3], us[2] / us[0], eager.syncUs, worstErr, ok ? "OK" : "FAIL", us[last - 4], us[last - 3],
               us[last - 2], us[last - 1], us[last]);
        fflush(stdout);
      }
    }
  }
  for (void* p : {in, res, w, resOut, out}) CUDA_OK(cudaFree(p));
  FC_OK(fcCommDestroy(noPdl));
  FC_OK(fcCommDestroy(unfused));
  for (fcComm_t comm : {forced, unaligned, gather, narrow, twoShot}) FC_OK(fcCommDestroy(comm));
  return failures ? 1 : 0;
}

NormInputs uploadNormInputs(const Ctx& c, fcDataType_t type, size_t tokens, size_t hidden, void* in, void* res,
                            void* w) {
  const size_t n = tokens * hidden, es = fcTypeSize(type);
  NormInputs ni;
  ni.seed = fcSplitMix(tokens * 7919 + hidden);
  const std::vector<char> h = fcPatternInput(type, n, ni.seed, c.rank);
  ni.residual = fcPatternInput(type, n, ni.seed + 1, 0);
  ni.weight = fcPatternInput(type, hidden, ni.seed + 2, 0);
  CUDA_OK(cudaMemcpyAsync(in, h.data(), n * es, cudaMemcpyHostToDevice, c.stream));
  CUDA_OK(cudaMemcpyAsync(res, ni.residual.data(), n * es, cudaMemcpyHostToDevice, c.stream));
  CUDA_OK(cudaMemcpyAsync(w, ni.weight.data(), hidden * es, cudaMemcpyHostToDevice, c.stream));
  // h is freed on return: the copies must have read it.
  CUDA_OK(cudaStreamSynchronize(c.stream));
  return ni;
}
