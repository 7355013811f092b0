#!/usr/bin/env python3
"""Where one call of a fused op spends its time: the GPU timeline of the call, per stream.

    FC_LIBRARY=build/src/libfusedcomm.so PYTHONPATH=python \\
      build/tools/fcrun/fcrun -n 2 -- python3 tools/probes/op-timeline.py OP M,N,K [M,N,K ...]

OP: agmm (fcAllGatherMatmul: A [M/W, K] plain, B [N, K], no Agathered), mmrs
(fcMatmulReduceScatter: A [M, K]), mmar (fcMatmulAllReduce) or mmarnorm
(fcMatmulAllReduceResidualRMSNorm). Each rank calls the op eagerly under torch.profiler,
ITERS times, each call behind a GPU sleep on its stream (torch.cuda._sleep) long enough
that the host has enqueued the whole call before the GPU reaches it: the timeline holds
the GPU's own gaps, not the host's launch time. The ranks are lined up by a synchronize and an NCCL barrier before
each sleep; their sleeps end some microseconds apart, which the op's first barrier takes
up (as in any call whose ranks arrive apart).

Printed per rank and shape: every GPU activity of the call (kernel, memcpy, memset),
grouped by stream in issue order, with its median start and end (us) from the end of the
sleep on the caller's stream over the calls, and its name (cuBLASLt's kernel names say
its tile and split choice). Also cuBLAS's GEMM of the same shape alone (torch.matmul) and
of one rank's rows, for scale. The library's choices come from the environment
(FC_AGMM_ALGO=pipeline, ...), read at init as always.

A probe: what it prints is evidence for docs/design.md, not a benchmark (eager calls
under a profiler); benchmarks time graph replays (fc-bench, tools/bench-torch-*.py).
"""
import json
import os
import statistics
import sys
import tempfile

import torch
import torch.distributed as dist

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import fusedcomm  # noqa: E402
from fusedcomm._core import OP_T, dtype_of  # noqa: E402
from fusedcomm.bench import init_process_group  # noqa: E402

ITERS, WARMUP = 12, 5
SLEEP_CYCLES = 400_000  # ~200 us at ~1.98 GHz: the host enqueues a whole call in less
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def make_call(op, comm, rank, world, M, N, K):
    g = torch.Generator(device="cuda").manual_seed(1234 + rank)
    rows = M // world if op == "agmm" else M
    a = torch.randn(rows, K, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g) / K ** 0.5
    c = torch.empty(M // world if op == "mmrs" else M, N, device="cuda", dtype=torch.bfloat16)
    residual, weight = torch.randn_like(c), torch.ones(N, device="cuda", dtype=torch.bfloat16)
    residual_out, norm_out = torch.empty_like(c), torch.empty_like(c)
    dt = dtype_of(a)

    def call():
        s = torch.cuda.current_stream().cuda_stream
        if op == "agmm":
            comm.all_gather_matmul(a.data_ptr(), b.data_ptr(), c.data_ptr(), M, N, K, dt, OP_T, stream=s)
        elif op == "mmrs":
            comm.matmul_reduce_scatter(a.data_ptr(), b.data_ptr(), c.data_ptr(), M, N, K, dt, OP_T, stream=s)
        elif op == "mmar":
            comm.matmul_all_reduce(a.data_ptr(), b.data_ptr(), c.data_ptr(), M, N, K, dt, OP_T, stream=s)
        else:  # mmarnorm
            comm.matmul_all_reduce_residual_rmsnorm(a.data_ptr(), b.data_ptr(), residual.data_ptr(), weight.data_ptr(),
                                                    residual_out.data_ptr(), norm_out.data_ptr(), M, N, K, 1e-6, dt,
                                                    OP_T, stream=s)

    own = a[: M // world] if op == "mmrs" else a
    full = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
    return call, (lambda: torch.matmul(full, b.t())), (lambda: torch.matmul(own, b.t()))


def timeline(fn):
    """[(stream, index, name, start, end)] medians over ITERS calls of fn, from each call's
    sleep end on the current stream."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(ITERS):
            torch.cuda.synchronize()
            dist.barrier()
            torch.cuda.synchronize()
            torch.cuda._sleep(SLEEP_CYCLES)
            fn()
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    gpu = sorted((e for e in events if e.get("cat") in GPU_CATS and "dur" in e), key=lambda e: e["ts"])
    sleeps = [e for e in gpu if "spin" in e["name"].lower() or "sleep" in e["name"].lower()]
    calls = []
    for i, s in enumerate(sleeps):
        t0 = s["ts"] + s["dur"]
        t1 = sleeps[i + 1]["ts"] if i + 1 < len(sleeps) else float("inf")
        # The NCCL barrier of the next iteration is before its sleep: stop at its first kernel.
        acts = [e for e in gpu if t0 <= e["ts"] < t1 and "nccl" not in e["name"].lower()]
        per = {}
        for e in acts:
            per.setdefault(e["args"].get("stream", -1), []).append(e)
        calls.append((t0, per))
    rows = {}
    for t0, per in calls:
        for stream, acts in per.items():
            for j, e in enumerate(acts):
                rows.setdefault((stream, j), []).append((e["name"], e["ts"] - t0, e["ts"] + e["dur"] - t0))
    out = []
    for (stream, j), xs in sorted(rows.items(), key=lambda kv: statistics.median(x[1] for x in kv[1])):
        if len(xs) < len(calls) // 2:
            continue  # not part of every call (a stray activity)
        name = xs[0][0]
        out.append((stream, j, name, statistics.median(x[1] for x in xs), statistics.median(x[2] for x in xs)))
    return out


def main():
    op = sys.argv[1]
    if op not in ("agmm", "mmrs", "mmar", "mmarnorm") or len(sys.argv) < 3:
        sys.exit(__doc__)
    shapes = [tuple(int(v) for v in s.split(",")) for s in sys.argv[2:]]
    rank, world = init_process_group("op-timeline")
    comm = fusedcomm.Communicator.from_process_group()
    knobs = " ".join("%s=%s" % kv for kv in sorted(os.environ.items())
                     if kv[0].startswith(("FC_AGMM", "FC_MMRS", "FC_MMAR")) or kv[0].endswith("_ALGO")) or "defaults"
    for M, N, K in shapes:
        call, gemm, own = make_call(op, comm, rank, world, M, N, K)
        for label, fn in (("op", call), ("torch.matmul, all rows", gemm), ("torch.matmul, one rank's rows", own)):
            out = timeline(fn)
            lines = ["== rank %d %s %d x %d x %d: %s (%s)" % (rank, op, M, N, K, label, knobs)]
            end = max((x[4] for x in out), default=0.0)
            for stream, j, name, start, stop in out:
                lines.append("  stream %-4s %7.1f %7.1f %6.1f  %s" % (stream, start, stop, stop - start, name[:110]))
            lines.append("  last activity ends at %.1f us" % end)
            # Ranks print in turn, so that their lines do not interleave.
            for r in range(world):
                if r == rank:
                    print("\n".join(lines), flush=True)
                dist.barrier()
    comm.destroy()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
