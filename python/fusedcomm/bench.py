"""Timing helpers for benchmarks and examples that compare libfusedcomm with other
libraries from PyTorch (docs/examples/python/tp_mlp.py, tools/bench-torch-agmm.py)."""
import hashlib
import os
import tempfile

import torch
import torch.distributed as dist


def init_process_group(name):
    """One NCCL process group over this job's ranks, this rank on its GPU; returns
    (rank, world size). Under torchrun (MASTER_ADDR set) from its environment; under
    tools/fcrun through a file named after `name` and the job's unique id
    (FC_UNIQUE_ID), so that concurrent jobs do not meet."""
    rank = int(os.environ.get("FC_RANK", os.environ.get("RANK", 0)))
    world = int(os.environ.get("FC_WORLD_SIZE", os.environ.get("WORLD_SIZE", 1)))
    torch.cuda.set_device(int(os.environ.get("FC_LOCAL_RANK", os.environ.get("LOCAL_RANK", rank))))
    device = torch.device("cuda", torch.cuda.current_device())
    if "MASTER_ADDR" in os.environ:
        dist.init_process_group("nccl", device_id=device)
    else:
        tag = hashlib.sha1(os.environ["FC_UNIQUE_ID"].encode()).hexdigest()[:16]
        path = os.path.join(tempfile.gettempdir(), "fc-%s-%s" % (name, tag))
        dist.init_process_group("nccl", init_method="file://" + path, rank=rank, world_size=world, device_id=device)
    return rank, world


def time_graphs(fns, calls=5, replays=15, group=None):
    """Microseconds per call of each function: each captured into a CUDA graph of
    `calls` calls (after one warm-up call outside capture), the graphs replayed in turn
    within each of `replays` rounds, so that none gains from a cooler GPU (at its power
    limit an H200 lowers its clock during a run); per function the median over rounds,
    then the max over the ranks of `group` (every rank must call this together)."""
    graphs = []
    for fn in fns:
        fn()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(calls):
                fn()
        g.replay()
        graphs.append(g)
    torch.cuda.synchronize()
    times = [[] for _ in fns]
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(replays):
        for g, ts in zip(graphs, times):
            start.record()
            g.replay()
            stop.record()
            stop.synchronize()
            ts.append(start.elapsed_time(stop) * 1000 / calls)
    t = torch.tensor([sorted(ts)[len(ts) // 2] for ts in times], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.tolist()


class Table:
    """A benchmark's CSV rows: rank 0 prints the header and each row as it comes, and
    write(path) saves them all (rank 0, when a path is given)."""

    def __init__(self, header, rank):
        self.header, self.rank, self.rows = header, rank, []
        if rank == 0:
            print(header, flush=True)

    def add(self, row):
        self.rows.append(row)
        if self.rank == 0:
            print(row, flush=True)

    def write(self, path):
        if self.rank == 0 and path:
            with open(path, "w") as f:
                f.write(self.header + "\n" + "\n".join(self.rows) + "\n")
