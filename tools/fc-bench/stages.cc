// fc-bench stages: where the Lamport one-shot all-reduce's time goes (issue 23). For
// each size, the kernel with every stage once (full) and with one stage left out or
// run twice (FC_LAMPORT_STAGES, device_comm.h LamportStage), each on its own
// communicator, all timed interleaved in one run (timeGraphs: graphs of -n calls,
// medians, max over ranks):
//   full         push, reset the run before's buffer, poll + sum + store, save the state
//   push-only    no poll, no sum, no store (the pushes, the reset, the launch)
//   push-twice   the pushes twice
//   sum-twice    poll + sum + store twice (the second time the data is there)
//   reset-twice  the reset twice
//   no-reset     no reset (from the third call on, the polls find stale data at once)
//   no-save      no state save (every call uses the same buffer: stale data at once)
// Only "full" computes the right sums; the others are timings. The calls are
// fcAllReduceOneShot (the Lamport one-shot up to its limit, 1 MiB at up to 4 ranks).
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "bench.h"
#include "fc_data.h"

int benchStages(Ctx& c, const Options& o) {
  const fcDataType_t type = parseType(o.dtype);
  const size_t es = fcTypeSize(type);
  const size_t minBytes = std::max(parseBytes(o.minBytes), es), maxBytes = o.maxBytes.empty() ? (1u << 20)
                                                                                             : parseBytes(o.maxBytes);
  const char* variants[] = {"full",        "push-only", "push-twice", "sum-twice",
                            "reset-twice", "no-reset",  "no-save"};
  std::vector<fcComm_t> comms;
  for (const char* v : variants) comms.push_back(commWithEnv(c, "FC_LAMPORT_STAGES", v));
  void *in, *out;
  CUDA_OK(cudaMalloc(&in, maxBytes));
  CUDA_OK(cudaMalloc(&out, maxBytes));
  CUDA_OK(cudaMemset(in, 0, maxBytes));
  if (c.rank == 0) {
    printf("# fc-bench stages: %s, the Lamport one-shot (fcAllReduceOneShot) with stages left out or twice; "
           "graph of %d calls, %d replays (median), %d warm-up\n",
           describeRun(c).c_str(), o.iters, o.replays, o.warmup);
    std::string header = "size";
    for (const char* v : variants) header += std::string(",") + v + "_us";
    printf("%s\n", header.c_str());
  }
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes = size_t(double(bytes) * o.factor + 0.5)) {
    const size_t count = bytes / es;
    std::vector<std::function<void()>> ops;
    for (fcComm_t comm : comms)
      ops.push_back([=, &c] { FC_OK(fcAllReduceOneShot(in, out, count, type, fcSum, comm, c.stream)); });
    std::vector<double> us = timeGraphs(c, o, ops);
    for (double& u : us) u = maxOverRanks(c, u);
    if (c.rank == 0) {
      printf("%zu", count * es);
      for (double u : us) printf(",%.2f", u);
      printf("\n");
      fflush(stdout);
    }
  }
  CUDA_OK(cudaFree(in));
  CUDA_OK(cudaFree(out));
  for (fcComm_t comm : comms) FC_OK(fcCommDestroy(comm));
  return 0;
}
