"""Timing helpers for benchmarks and examples that compare libfusedcomm with other
libraries from PyTorch (docs/examples/python/tp_mlp.py, tools/bench-torch-*.py), and
FlashInfer's TensorRT-LLM all-reduce as a peer when it is importable."""
import hashlib
import os
import tempfile
import time

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


# How time_graphs starts its replays unless told (parse_args' --replays-start, --calls):
# "sync", each after this rank's host synchronised on the one before, so a skew between
# the ranks' hosts is waited out inside the early rank's first call and counted (spread
# over the graph's calls); "barrier", an untimed NCCL all-reduce of one element on the
# stream first, so every rank's replay starts within the all-reduce's own skew of the
# others' (as fc-bench --replays-start barrier: what a call inside a model's step sees,
# where the ranks are in step). `calls`: calls per graph where the caller names none.
REPLAYS = {"start": "sync", "calls": 5}
# "barrier": after the NCCL all-reduce, the stream also sleeps this many GPU clock cycles
# (torch.cuda._sleep), then runs a second one-element all-reduce, before the replay's
# start event. From Python, recording the event and launching the graph takes the host
# longer than the one-element all-reduce takes the GPU, so without the sleep the GPU idled
# between the start event and the graph's first kernel, and that idle time (tens of us,
# different on every replay) was counted, spread over the graph's calls. The sleep itself
# ends at different times on GPUs at different clocks (several us apart), which the early
# rank would wait out inside its first call, so the second all-reduce, enqueued during the
# sleep, lines the ranks up again right before the start event. 200k cycles (~100 us)
# covered the host's work at 2 ranks (ours from PyTorch within 0.2 us of fc-bench at
# every 2-rank cell of 8 KiB - 4 MiB, 4-H200 node, 90c8ad3) but not at 4, where the host's
# second all-reduce takes longer: there ours from PyTorch was 0.5 us above fc-bench at
# the median cell and up to 3.0 (20-60 us a replay; FlashInfer's column, which fc-bench
# does not run, cannot be checked so). 1M cycles (~0.5 ms) leave the host five times the
# margin, at ~0.5 ms a replay.
BARRIER_COVER_CYCLES = 1_000_000


def time_graphs(fns, calls=None, replays=15, group=None, start=None, warmup=5):
    """Microseconds per call of each function: each captured into a CUDA graph of
    `calls` calls (after one warm-up call outside capture), the graphs replayed in turn
    within each of `replays` rounds, so that none gains from a cooler GPU (at its power
    limit an H200 lowers its clock during a run); per function the median over rounds,
    then the max over the ranks of `group` (every rank must call this together).
    `warmup` untimed rounds first (as fc-bench's warm-up replays): a decode cell's rounds
    last only milliseconds, and a GPU that idled while the cell was set up may still be
    raising its clock through them. `calls` / `start`: REPLAYS' where not given."""
    calls = calls or REPLAYS["calls"]
    start_mode = start or REPLAYS["start"]
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
    for _ in range(warmup):
        for g in graphs:
            g.replay()
    torch.cuda.synchronize()
    times = [[] for _ in fns]
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flag = torch.zeros(1, device="cuda") if start_mode == "barrier" else None
    for _ in range(replays):
        for g, ts in zip(graphs, times):
            if flag is not None:
                dist.all_reduce(flag, group=group)  # the current stream waits for it; untimed
                if BARRIER_COVER_CYCLES:
                    torch.cuda._sleep(BARRIER_COVER_CYCLES)  # untimed: covers the host's launches
                    dist.all_reduce(flag, group=group)  # the ranks in step again after the sleep
            begin.record()
            g.replay()
            end.record()
            end.synchronize()
            ts.append(begin.elapsed_time(end) * 1000 / calls)
    t = torch.tensor([sorted(ts)[len(ts) // 2] for ts in times], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.tolist()


def time_eager(fns, calls=20, replays=15, group=None):
    """Microseconds per call of each function called eagerly, as a serving loop calls
    it: `calls` calls back to back, then a synchronize; wall time per call, median over
    `replays` rounds (the functions in turn within a round), max over the ranks."""
    for fn in fns:
        fn()
    torch.cuda.synchronize()
    times = [[] for _ in fns]
    for _ in range(replays):
        for fn, ts in zip(fns, times):
            dist.barrier(group=group, device_ids=[torch.cuda.current_device()])
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t0) * 1e6 / calls)
    t = torch.tensor([sorted(ts)[len(ts) // 2] for ts in times], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.tolist()


class FlashInferPeer:
    """FlashInfer's trtllm_allreduce_fusion (TensorRT-LLM's Lamport all-reduce, what
    vLLM and SGLang call at decode), for side-by-side columns. FlashInferPeer.open()
    returns one, or None and the reason (not importable, or its setup failed): the
    benchmarks then leave its columns out and say why. One workspace per hidden size
    (FlashInfer sizes it for max_tokens x hidden); every rank of the group calls open
    and close together."""

    @staticmethod
    def open(rank, world, max_tokens, hidden, group=None):
        try:
            from flashinfer.comm import trtllm_ar
        except Exception as e:  # ImportError, or its JIT build failing
            return None, "FlashInfer not importable: %s" % str(e).split("\n")[0]
        try:
            handles, ptrs, meta = trtllm_ar.trtllm_create_ipc_workspace_for_all_reduce_fusion(
                rank, world, max_tokens, hidden, group=group, create_metadata=True)
        except Exception as e:
            return None, "FlashInfer workspace: %s" % str(e).split("\n")[0]
        return FlashInferPeer(trtllm_ar, handles, ptrs, meta, rank, world, group), ""

    def __init__(self, mod, handles, ptrs, meta, rank, world, group):
        self.mod, self.handles, self.ptrs, self.meta = mod, handles, ptrs, meta
        self.rank, self.world, self.group = rank, world, group

    def _call(self, x, pattern, **outs):
        none = dict(allreduce_out=None, residual_in=None, residual_out=None, norm_out=None, quant_out=None,
                    scale_out=None, rms_gamma=None, rms_eps=None, scale_factor=None, layout_code=None)
        none.update(outs)
        self.mod.trtllm_allreduce_fusion(
            allreduce_in=x, world_size=self.world, world_rank=self.rank, token_num=x.shape[0], hidden_dim=x.shape[1],
            workspace_ptrs=self.ptrs, launch_with_pdl=True, trigger_completion_at_end=True, fp32_acc=True,
            pattern_code=pattern, use_oneshot=None, metadata=self.meta, **none)

    def all_reduce(self, x, out):
        """out = sum over ranks of x ([tokens, hidden]), its own one-shot / two-shot choice."""
        self._call(x, self.mod.AllReduceFusionPattern.kAllReduce, allreduce_out=out)

    def all_reduce_residual_rmsnorm(self, x, residual, gamma, eps, residual_out, norm_out):
        """residual_out = allreduce(x) + residual; norm_out = RMSNorm(residual_out) * gamma."""
        self._call(x, self.mod.AllReduceFusionPattern.kARResidualRMSNorm, residual_in=residual,
                   residual_out=residual_out, norm_out=norm_out, rms_gamma=gamma, rms_eps=eps)

    def close(self):
        self.mod.trtllm_destroy_ipc_workspace_for_all_reduce_fusion(self.handles, self.group)


# The decode grid of issue 44: hidden sizes x token counts, comma-separated, the same
# lists as tools/common/decode_grid.h (fc-bench --grid; tests/cpu/check_grid.py keeps
# the two equal; the header says why these values).
DECODE_GRIDS = {
    "short": {"hidden": "2048,3584,4096,5120,8192,16384",
              "tokens": "1,3,8,17,64,100,128,255,512,1000,2048"},
    "full": {"hidden": "2048,2560,3072,3584,4096,5120,6144,7168,8192,12288,16384",
             "tokens": "1,2,3,4,6,8,12,16,17,24,32,48,64,96,100,128,192,255,256,384,512,768,1000,1024,1536,2048"},
}


def parse_args(flags=None, grid=False, argv=None, **lists):
    """A benchmark's command line: --csv FILE, and one comma-separated list option per
    keyword (its default the value), e.g. parse_args(tokens="1,2,4", hidden="4096");
    `flags`: {name: help} of on/off options (False unless given). grid=True adds
    --grid short|full (DECODE_GRIDS): the tokens and hidden lists from that grid,
    unless --tokens / --hidden name others."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", help="also write the rows to this file (rank 0)")
    if grid:
        ap.add_argument("--grid", choices=sorted(DECODE_GRIDS),
                        help="sweep the decode grid (hidden x tokens) instead of the default lists")
    for name, default in lists.items():
        # None: not given, so that --grid can tell a default from an explicit list.
        ap.add_argument("--" + name, default=None, help="comma-separated (default %s)" % default)
    for name, text in (flags or {}).items():
        ap.add_argument("--" + name, action="store_true", help=text)
    ap.add_argument("--replays-start", choices=("sync", "barrier"), default=REPLAYS["start"],
                    help="graph replays start after this rank's host synchronised (sync, the default) or "
                         "together on every rank after an untimed NCCL all-reduce (barrier)")
    ap.add_argument("--calls", type=int, default=None,
                    help="calls per captured graph where the benchmark names none (default %d)" % REPLAYS["calls"])
    args = ap.parse_args(argv)
    REPLAYS["start"] = args.replays_start
    if args.calls:
        REPLAYS["calls"] = args.calls
    for name, default in lists.items():
        if getattr(args, name) is None:
            chosen = getattr(args, "grid", None)
            setattr(args, name, DECODE_GRIDS[chosen][name] if chosen and name in DECODE_GRIDS[chosen] else default)
    return args


# The caller forms of the sequence-parallel pair (issue 45; tools/bench-torch-agmm.py and
# bench-torch-mmrs.py with --forms / --msweep, as fc-bench agmm / mmrs there).
SWEEP_M = (512, 1024, 2048, 4096, 8192, 16384, 32768)


def caller_forms(forms, agathered="0"):
    """[(symmetric, agathered)] of --forms "plain,symmetric" (empty: both) crossed with
    --agathered "0,1" (empty: both)."""
    out = []
    for a in (forms or "plain,symmetric").split(","):
        if a not in ("plain", "symmetric"):
            raise SystemExit("unknown form %r (plain, symmetric)" % a)
        for g in (agathered or "0,1").split(","):
            if g not in ("0", "1"):
                raise SystemExit("--agathered takes 0, 1 or 0,1, not %r" % g)
            out.append((a == "symmetric", g == "1"))
    return out


def sp_shapes(public, sweep):
    """The shapes (M, N, K, in_public, in_sweep) of a caller-form table: `public` and
    `sweep` lists of (M, N, K), each shape once, ordered by layer (N, K) then M."""
    shapes = {}
    for s in public:
        shapes[s] = [1, 0]
    for s in sweep:
        shapes.setdefault(s, [0, 0])[1] = 1
    layers = []
    for m, n, k in shapes:
        if (n, k) not in layers:
            layers.append((n, k))
    order = sorted(shapes, key=lambda s: (layers.index(s[1:]), s[0]))
    return [s + tuple(shapes[s]) for s in order]


def sp_timing(flops, calls, replays):
    """(calls, replays) for one shape: GEMMs of at least 1 TFLOP per rank (M 16384-32768
    at the larger layers: 3-6 ms a call) as graphs of 2 calls, 6 replays, so that a
    dozen columns of them fit the GPU check's time (as fc-bench's timingFor)."""
    return (2, min(replays, 6)) if flops >= 1e12 else (calls, replays)


def forced_communicators(var, algos=("sm", "ce"), group=None):
    """{algo: Communicator} made with the environment variable `var` (an FC_*_ALGO, read
    at init) set to each algorithm in turn: our collectives with their algorithm forced,
    for "the communication alone" columns (every rank calls this together)."""
    from ._core import Communicator
    before, out = os.environ.get(var), {}
    try:
        for algo in algos:
            os.environ[var] = algo
            out[algo] = Communicator.from_process_group(group)
    finally:
        if before is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = before
    return out


def ints(text):
    return [int(x) for x in text.split(",")]


def relerr(got, want):
    """max |got - want| / max |want| (float32)."""
    return ((got.float() - want.float()).abs().max() / want.float().abs().max().clamp_min(1e-30)).item()


def flashinfer_by_hidden(rank, world, max_tokens, hiddens, group=None):
    """For each hidden size: (hidden, FlashInferPeer or None), its workspace open while the
    caller's loop body runs and closed after; where there is none, rank 0 prints why."""
    for hidden in hiddens:
        peer, why = FlashInferPeer.open(rank, world, max_tokens, hidden, group)
        if peer is None and rank == 0:
            print("# hidden %d: no FlashInfer columns: %s" % (hidden, why), flush=True)
        yield hidden, peer
        if peer is not None:
            peer.close()


class Table:
    """A benchmark's CSV rows: rank 0 prints a comment line (world size, device, torch
    version, then `note`: how it times), the header, and each row as it comes;
    write(path) saves them all (rank 0, when a path is given)."""

    def __init__(self, header, rank, world, note):
        self.header, self.rank, self.rows = header, rank, []
        if rank == 0:
            print("# %d ranks, %s, torch %s, %s" % (world, torch.cuda.get_device_name(), torch.__version__, note))
            print(header, flush=True)

    def add(self, row):
        self.rows.append(row)
        if self.rank == 0:
            print(row, flush=True)

    def write(self, path):
        if self.rank == 0 and path:
            with open(path, "w") as f:
                f.write(self.header + "\n" + "\n".join(self.rows) + "\n")
