"""PyTorch as a real client of libfusedcomm, through the ctypes module, one process
per rank:

    FC_LIBRARY=build/src/libfusedcomm.so PYTHONPATH=python \\
        build/tools/fcrun/fcrun -n 2 -- python3 tests/python/test_torch_client.py
    # or: torchrun --nproc-per-node 2 tests/python/test_torch_client.py (same env)

With the default communicator configuration: every op and dtype against float64
references and torch.distributed (NCCL); every op captured in torch.cuda.graph (warm-up
on a side stream, capture on torch's own side stream) and replayed 100 times with fresh
inputs; 16 streams round-robin and a fresh stream per call; eager loops; fcMemAlloc
memory as a tensor (zero-copy input); CPU tensors (pageable, pinned) refused by every
op; mismatched calls (count, dtype, kind) caught on the barrier-free all-reduce. Every rank runs every check in the same order and records
failures instead of stopping, so that the ranks' calls stay paired. Exits 77 (skipped)
without torch or without a GPU per rank.
"""
import hashlib
import os
import sys
import tempfile
import time

try:
    import torch
    import torch.distributed as dist
except ImportError:
    print("SKIP: torch is not installed")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: no CUDA GPU here")
    sys.exit(77)

import fusedcomm  # noqa: E402  (PYTHONPATH=python)

TOL = {torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10, torch.float32: 2 ** -21}
FAILURES = []
CHECKS = [0]


def check(ok, what):
    CHECKS[0] += 1
    if not ok:
        FAILURES.append(what)
        print("FAIL: %s" % what, flush=True)


def close(got, want64, dtype, what, scale=None, terms=1, partials=None):
    """got against a float64 reference: one rounding to dtype (TOL, relative), plus
    fp32 accumulation of `terms` terms whose magnitudes add up to `scale`, plus (when
    given) one rounding to dtype of each partial sum whose magnitudes add up to
    `partials` (fcMatmulReduceScatter's partials in the input type)."""
    want64 = want64.to(got.device)
    err = (got.double() - want64).abs()
    bound = TOL[dtype] * want64.abs() + 1e-6
    if scale is not None:
        bound = bound + terms * 2.0 ** -24 * scale.to(got.device)
    if partials is not None:
        bound = bound + TOL[dtype] * partials.to(got.device)
    ok = bool((err <= bound).all()) and not bool(got.isnan().any())
    check(ok, "%s: max error %.3g" % (what, err.max().item() if err.numel() else 0.0))


def rank_input(seed, rank, shape, dtype):
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)


class Ctx:
    def __init__(self):
        self.rank = int(os.environ.get("FC_RANK", os.environ.get("RANK", "0")))
        self.world = int(os.environ.get("FC_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
        self.local = int(os.environ.get("FC_LOCAL_RANK", os.environ.get("LOCAL_RANK", self.rank)))
        if self.local >= torch.cuda.device_count():
            print("SKIP: rank %d needs GPU %d, %d visible" % (self.rank, self.local, torch.cuda.device_count()))
            sys.exit(77)
        torch.cuda.set_device(self.local)
        self.lib = fusedcomm.Library()
        # torch.distributed (NCCL) for the reference column and to share ids: under
        # fcrun through a file named from our unique id, under torchrun through env://.
        if "FC_UNIQUE_ID" in os.environ:
            tag = hashlib.sha1(os.environ["FC_UNIQUE_ID"].encode()).hexdigest()[:16]
            init = "file://" + os.path.join(tempfile.gettempdir(), "fc-torch-client-" + tag)
            dist.init_process_group("nccl", init_method=init, rank=self.rank, world_size=self.world)
        else:
            dist.init_process_group("nccl")
        self.comm = self.new_comm()

    def new_comm(self, config=None):
        """A communicator of every rank (collective); its id travels through torch.distributed."""
        ids = [self.lib.unique_id().hex() if self.rank == 0 else None]
        dist.broadcast_object_list(ids, src=0)
        return fusedcomm.Communicator(self.lib, self.world, fusedcomm.UniqueId.from_hex(ids[0]), self.rank, config)


def reduce64(seed, world, shape, dtype):
    return sum(rank_input(seed, r, shape, dtype).double() for r in range(world))


def abs64(seed, world, shape, dtype):
    return sum(rank_input(seed, r, shape, dtype).double().abs() for r in range(world))


def test_ops_against_references(c, seed):
    """Every op, every dtype, against float64 and against torch.distributed (NCCL)."""
    s = torch.cuda.current_stream().cuda_stream
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        dt = fusedcomm.dtype_of(torch.empty(0, dtype=dtype))
        for n in (1, 1001, 32768, 300_000, 3_000_001):
            seed += 1
            x = rank_input(seed, c.rank, (n,), dtype).cuda()
            y = torch.full_like(x, float("nan"))
            c.comm.all_reduce(x.data_ptr(), y.data_ptr(), n, dt, s)
            ref = x.clone()
            dist.all_reduce(ref)
            torch.cuda.synchronize()
            scale = abs64(seed, c.world, (n,), dtype)
            close(y, reduce64(seed, c.world, (n,), dtype), dtype, "all_reduce %s n=%d" % (dtype, n), scale, c.world)
            close(y, ref.double(), dtype, "all_reduce %s n=%d vs NCCL" % (dtype, n), scale, 2 * c.world)
        for rc in (1, 4099, 1 << 20):
            seed += 1
            x = rank_input(seed, c.rank, (c.world * rc,), dtype).cuda()
            y = torch.full((rc,), float("nan"), dtype=dtype, device="cuda")
            c.comm.reduce_scatter(x.data_ptr(), y.data_ptr(), rc, dt, s)
            ref = torch.empty_like(y)
            dist.reduce_scatter_tensor(ref, x)
            torch.cuda.synchronize()
            mine = slice(c.rank * rc, (c.rank + 1) * rc)
            want = reduce64(seed, c.world, (c.world * rc,), dtype)[mine]
            scale = abs64(seed, c.world, (c.world * rc,), dtype)[mine]
            close(y, want, dtype, "reduce_scatter %s rc=%d" % (dtype, rc), scale, c.world)
            close(y, ref.double(), dtype, "reduce_scatter %s rc=%d vs NCCL" % (dtype, rc), scale, 2 * c.world)
            seed += 1
            x = rank_input(seed, c.rank, (rc,), dtype).cuda()
            y = torch.full((c.world * rc,), float("nan"), dtype=dtype, device="cuda")
            c.comm.all_gather(x.data_ptr(), y.data_ptr(), rc, dt, s)
            ref = torch.empty_like(y)
            dist.all_gather_into_tensor(ref, x)
            torch.cuda.synchronize()
            want = torch.cat([rank_input(seed, r, (rc,), dtype) for r in range(c.world)])
            check(torch.equal(y.cpu(), want), "all_gather %s rc=%d" % (dtype, rc))
            check(torch.equal(y, ref), "all_gather %s rc=%d vs NCCL" % (dtype, rc))
    for dtype in (torch.bfloat16, torch.float16):
        dt = fusedcomm.dtype_of(torch.empty(0, dtype=dtype))
        for (ms, n, k) in ((128, 256, 512), (1024, 3072, 1024)):
            m = ms * c.world
            for trans_b in (fusedcomm.OP_N, fusedcomm.OP_T):
                for gathered in (False, True):
                    seed += 1
                    a = rank_input(seed, c.rank, (ms, k), dtype).cuda()
                    b = rank_input(seed, 99, (k, n) if trans_b == fusedcomm.OP_N else (n, k), dtype).cuda()
                    out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
                    ag = torch.empty((m, k), dtype=dtype, device="cuda") if gathered else None
                    c.comm.all_gather_matmul(a.data_ptr(), b.data_ptr(), out.data_ptr(), m, n, k, dt, trans_b,
                                             ag.data_ptr() if gathered else None, s)
                    full = torch.cat([rank_input(seed, r, (ms, k), dtype) for r in range(c.world)]).cuda().double()
                    bop = b.double() if trans_b == fusedcomm.OP_N else b.double().t()
                    torch.cuda.synchronize()
                    close(out, full @ bop, dtype, "all_gather_matmul %s %s trans_b=%d gathered=%s" % (
                        dtype, (m, n, k), trans_b, gathered), full.abs() @ bop.abs(), k)
                    if gathered:
                        check(torch.equal(ag, full.to(dtype)), "all_gather_matmul Agathered %s" % dtype)
                    seed += 1
                    a = rank_input(seed, c.rank, (m, k), dtype).cuda()
                    b = rank_input(seed, 1000 + c.rank, (k, n) if trans_b == fusedcomm.OP_N else (n, k),
                                   dtype).cuda()
                    out = torch.full((ms, n), float("nan"), dtype=dtype, device="cuda")
                    c.comm.matmul_reduce_scatter(a.data_ptr(), b.data_ptr(), out.data_ptr(), m, n, k, dt, trans_b, s)
                    want, scale, partials = 0, 0, 0
                    for r in range(c.world):
                        br = rank_input(seed, 1000 + r, (k, n) if trans_b == fusedcomm.OP_N else (n, k),
                                        dtype).cuda().double()
                        br = br if trans_b == fusedcomm.OP_N else br.t()
                        ar = rank_input(seed, r, (m, k), dtype).cuda().double()[c.rank * ms:(c.rank + 1) * ms]
                        want, scale = want + ar @ br, scale + ar.abs() @ br.abs()
                        partials = partials + (ar @ br).abs()
                    torch.cuda.synchronize()
                    # Each rank's product rounded once to dtype (the default partials),
                    # summed over ranks in fp32, rounded once.
                    close(out, want, dtype, "matmul_reduce_scatter %s %s trans_b=%d" % (dtype, (m, n, k), trans_b),
                          scale, k + c.world, partials)
    return seed


def ops_for_graphs(c, seed, dtype=torch.bfloat16):
    """Inputs, outputs, a callable issuing every op on the current stream, and the
    float64 references of a given seed's inputs."""
    dt = fusedcomm.dtype_of(torch.empty(0, dtype=dtype))
    W, ms, n, k = c.world, 256, 512, 256
    bufs = {
        "x": torch.empty(70_000, dtype=dtype, device="cuda"),
        "xl": torch.empty(2_000_000, dtype=dtype, device="cuda"),
        "rs": torch.empty(W * 9000, dtype=dtype, device="cuda"),
        "ag": torch.empty(9000, dtype=dtype, device="cuda"),
        "a": torch.empty((ms, k), dtype=dtype, device="cuda"),
        "am": torch.empty((ms * W, k), dtype=dtype, device="cuda"),
        "b": torch.empty((n, k), dtype=dtype, device="cuda"),
    }
    outs = {
        "x": torch.empty_like(bufs["x"]), "xl": torch.empty_like(bufs["xl"]),
        "rs": torch.empty(9000, dtype=dtype, device="cuda"), "ag": torch.empty(W * 9000, dtype=dtype, device="cuda"),
        "agmm": torch.empty((ms * W, n), dtype=dtype, device="cuda"), "mmrs": torch.empty((ms, n), dtype=dtype,
                                                                                          device="cuda"),
    }

    def fill(seed):
        for i, (name, t) in enumerate(sorted(bufs.items())):
            t.copy_(rank_input(seed + i, c.rank if name != "b" else 77, tuple(t.shape), dtype))
        for t in outs.values():
            t.fill_(float("nan"))

    def issue():
        s = torch.cuda.current_stream().cuda_stream
        P = lambda t: t.data_ptr()  # noqa: E731
        c.comm.all_reduce(P(bufs["x"]), P(outs["x"]), bufs["x"].numel(), dt, s)
        c.comm.all_reduce(P(bufs["xl"]), P(outs["xl"]), bufs["xl"].numel(), dt, s)
        c.comm.reduce_scatter(P(bufs["rs"]), P(outs["rs"]), 9000, dt, s)
        c.comm.all_gather(P(bufs["ag"]), P(outs["ag"]), 9000, dt, s)
        c.comm.all_gather_matmul(P(bufs["a"]), P(bufs["b"]), P(outs["agmm"]), ms * W, n, k, dt, fusedcomm.OP_T,
                                 None, s)
        c.comm.matmul_reduce_scatter(P(bufs["am"]), P(bufs["b"]), P(outs["mmrs"]), ms * W, n, k, dt, fusedcomm.OP_T,
                                     s)

    def verify(seed, what):
        names = sorted(bufs)
        inp = {name: [rank_input(seed + i, r if name != "b" else 77, tuple(bufs[name].shape), dtype).cuda().double()
                      for r in range(W)] for i, name in enumerate(names)}
        total = {name: sum(v) for name, v in inp.items()}
        scale = {name: sum(t.abs() for t in v) for name, v in inp.items()}
        mine = slice(c.rank * 9000, (c.rank + 1) * 9000)
        close(outs["x"], total["x"], dtype, what + ": all_reduce 140 KB", scale["x"], W)
        close(outs["xl"], total["xl"], dtype, what + ": all_reduce 4 MB", scale["xl"], W)
        close(outs["rs"], total["rs"][mine], dtype, what + ": reduce_scatter", scale["rs"][mine], W)
        check(torch.equal(outs["ag"], torch.cat(inp["ag"]).to(dtype)), what + ": all_gather")
        b = inp["b"][0].t()
        a = torch.cat(inp["a"])
        close(outs["agmm"], a @ b, dtype, what + ": all_gather_matmul", a.abs() @ b.abs(), k)
        rows = slice(c.rank * ms, (c.rank + 1) * ms)
        am = [t[rows] for t in inp["am"]]
        close(outs["mmrs"], sum(am) @ b, dtype, what + ": matmul_reduce_scatter", sum(t.abs() for t in am) @ b.abs(),
              k + W, sum((t @ b).abs() for t in am))

    return fill, issue, verify


def test_graph_capture(c, seed):
    """torch.cuda.graph with the default config: warm-up on a side stream, capture on
    torch's capture stream, 100 replays with fresh inputs every 10."""
    fill, issue, verify = ops_for_graphs(c, seed)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fill(seed)
        issue()  # warm-up: scratch and cuBLASLt plans take their size outside capture
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    verify(seed, "warm-up on a side stream")
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            issue()
    except fusedcomm.FcError as e:
        check(False, "capture: %s" % e)
        return seed + 100
    for r in range(100):
        if r % 10 == 0:
            seed += 10
            fill(seed)
        g.replay()
        if r % 10 == 9:
            torch.cuda.synchronize()
            verify(seed, "graph replay %d" % r)
    return seed + 10


def test_streams(c, seed):
    """16 streams round-robin, a fresh stream per call, back-to-back eager loops."""
    dt = fusedcomm.BFLOAT16
    n, calls = 50_000, 96
    x = torch.stack([rank_input(seed + i, c.rank, (n,), torch.bfloat16) for i in range(calls)]).cuda()
    want = torch.stack([reduce64(seed + i, c.world, (n,), torch.bfloat16) for i in range(calls)])
    scale = torch.stack([abs64(seed + i, c.world, (n,), torch.bfloat16) for i in range(calls)])
    streams = [torch.cuda.Stream() for _ in range(16)]
    for mode in ("16 streams round-robin", "a fresh stream per call", "back to back on one stream"):
        y = torch.full_like(x, float("nan"))
        torch.cuda.synchronize()
        for i in range(calls):
            s = (streams[i % 16] if mode.startswith("16") else torch.cuda.Stream() if mode.startswith("a fresh")
                 else torch.cuda.current_stream())
            c.comm.all_reduce(x[i].data_ptr(), y[i].data_ptr(), n, dt, s.cuda_stream)
        torch.cuda.synchronize()
        close(y, want, torch.bfloat16, "all_reduce, " + mode, scale, c.world)
    return seed + calls


def test_symmetric_tensor(c, seed):
    """fcMemAlloc memory as a torch tensor: a zero-copy input."""
    n = 1 << 20
    x = fusedcomm.symmetric_tensor(c.comm, n, torch.bfloat16)
    x.copy_(rank_input(seed, c.rank, (n,), torch.bfloat16))
    y = torch.full_like(x, float("nan"))
    c.comm.all_reduce(x.data_ptr(), y.data_ptr(), n, fusedcomm.BFLOAT16, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    close(y, reduce64(seed, c.world, (n,), torch.bfloat16), torch.bfloat16, "all_reduce of an fcMemAlloc tensor",
          abs64(seed, c.world, (n,), torch.bfloat16), c.world)
    ptr = x.data_ptr()
    del x
    c.comm.mem_free(ptr)
    return seed + 1


def test_refused_pointers(c, seed):
    """CPU tensors (pageable and pinned) passed by data_ptr() to every op: refused with
    fcInvalidArgument naming the argument, nothing written, the communicator still
    works. Refusals launch nothing: rank-local, the ranks stay paired."""
    s = torch.cuda.current_stream().cuda_stream
    dt, W, n = fusedcomm.BFLOAT16, c.world, 4096
    ms, mn, mk = 16, 64, 32
    gpu = {"x": torch.zeros(W * n, dtype=torch.bfloat16, device="cuda"),
           "a": torch.zeros((ms * W, mk), dtype=torch.bfloat16, device="cuda"),
           "b": torch.zeros((mk, mn), dtype=torch.bfloat16, device="cuda")}
    outs = {"y": torch.full((W * n,), float("nan"), dtype=torch.bfloat16, device="cuda"),
            "c": torch.full((ms * W, mn), float("nan"), dtype=torch.bfloat16, device="cuda")}
    P = lambda t: t.data_ptr()  # noqa: E731
    x, y, a, b, out = P(gpu["x"]), P(outs["y"]), P(gpu["a"]), P(gpu["b"]), P(outs["c"])
    m = ms * W
    for kind, pinned in (("host memory", False), ("pinned host memory", True)):
        cpu = torch.full((W * n,), 3.0, dtype=torch.bfloat16)
        if pinned:
            cpu = cpu.pin_memory()
        h = P(cpu)
        calls = (
            ("all_reduce sendbuff", "sendbuff", lambda: c.comm.all_reduce(h, y, n, dt, s)),
            ("all_reduce recvbuff", "recvbuff", lambda: c.comm.all_reduce(x, h, n, dt, s)),
            ("all_reduce_one_shot sendbuff", "sendbuff", lambda: c.comm.all_reduce_one_shot(h, y, n, dt, s)),
            ("reduce_scatter sendbuff", "sendbuff", lambda: c.comm.reduce_scatter(h, y, n, dt, s)),
            ("reduce_scatter recvbuff", "recvbuff", lambda: c.comm.reduce_scatter(x, h, n, dt, s)),
            ("all_gather sendbuff", "sendbuff", lambda: c.comm.all_gather(h, y, n, dt, s)),
            ("all_gather recvbuff", "recvbuff", lambda: c.comm.all_gather(x, h, n, dt, s)),
            ("all_gather_matmul A", "A", lambda: c.comm.all_gather_matmul(h, b, out, m, mn, mk, dt, stream=s)),
            ("all_gather_matmul Agathered", "Agathered",
             lambda: c.comm.all_gather_matmul(a, b, out, m, mn, mk, dt, a_gathered=h, stream=s)),
            ("matmul_reduce_scatter B", "B", lambda: c.comm.matmul_reduce_scatter(a, h, out, m, mn, mk, dt, stream=s)),
            ("matmul_reduce_scatter C", "C", lambda: c.comm.matmul_reduce_scatter(a, b, h, m, mn, mk, dt, stream=s)),
        )
        for what, arg, call in calls:
            try:
                call()
                check(False, "%s: a CPU tensor (%s) was accepted" % (what, kind))
            except fusedcomm.FcError as e:
                check(e.code == fusedcomm.INVALID_ARGUMENT and (arg + " (") in e.message and kind in e.message,
                      "%s, CPU tensor (%s): %s" % (what, kind, e))
        torch.cuda.synchronize()
        check(bool((cpu == 3.0).all()), "CPU tensor (%s) left as it was" % kind)
        check(bool(outs["y"].isnan().all()) and bool(outs["c"].isnan().all()),
              "outputs untouched after the refusals (%s)" % kind)
    # Still usable: a correct all-reduce (collective).
    seed += 1
    xin = rank_input(seed, c.rank, (n,), torch.bfloat16).cuda()
    yout = torch.full_like(xin, float("nan"))
    c.comm.all_reduce(P(xin), P(yout), n, dt, s)
    torch.cuda.synchronize()
    close(yout, reduce64(seed, c.world, (n,), torch.bfloat16), torch.bfloat16, "all_reduce after refused pointers",
          abs64(seed, c.world, (n,), torch.bfloat16), c.world)
    code, message = c.comm.async_error()
    check(code == fusedcomm.SUCCESS, "no asynchronous error after refused pointers: %s" % message)
    return seed


def test_mismatch(c, seed):
    """Mismatched calls on the barrier-free (Lamport) all-reduce: every rank reports an
    error quickly (fcInvalidUsage naming both calls, or fcRemoteError when the peer's
    report came first), on a communicator of their own."""
    cases = (("count 4000 vs 4007", lambda r: (4000 + 7 * (r == 1), torch.float32)),
             ("fp32 vs fp16", lambda r: (4000, torch.float16 if r == 1 else torch.float32)),
             ("one-shot vs two-shot", lambda r: ((1 << 20) if r == 1 else (1 << 14), torch.float32)))
    for what, call in cases:
        comm = c.new_comm(fusedcomm.Config(timeoutMs=20000))
        n, dtype = call(c.rank)
        same = torch.ones(4000, dtype=torch.float32, device="cuda")
        x = torch.ones(n, dtype=dtype, device="cuda")
        s = torch.cuda.current_stream().cuda_stream
        t0 = time.monotonic()
        for _ in range(2):  # matched calls first: the mismatch is not a first call
            comm.all_reduce(same.data_ptr(), same.data_ptr(), 4000, fusedcomm.FLOAT32, s)
        comm.all_reduce(x.data_ptr(), x.data_ptr(), n, fusedcomm.dtype_of(x), s)
        torch.cuda.synchronize()
        code, message = comm.async_error()
        took = time.monotonic() - t0
        names_both = code == fusedcomm.INVALID_USAGE and "mismatched" in message
        check(code in (fusedcomm.INVALID_USAGE, fusedcomm.REMOTE_ERROR) and took < 10,
              "mismatch %s: code %d after %.1f s: %s" % (what, code, took, message))
        named = torch.tensor([int(names_both)], device="cuda")
        dist.all_reduce(named)
        check(named.item() >= 1, "mismatch %s: no rank named both calls" % what)
        print("mismatch %s: rank %d: code %d after %.2f s: %s" % (what, c.rank, code, took, message), flush=True)
        comm.destroy()
    return seed


def main():
    c = Ctx()
    seed = 1
    for test in (test_ops_against_references, test_graph_capture, test_streams, test_symmetric_tensor,
                 test_refused_pointers, test_mismatch):
        t0 = time.monotonic()
        before = len(FAILURES)
        seed = test(c, seed)
        print("rank %d: %s: %s (%.1f s)" % (c.rank, test.__name__, "ok" if len(FAILURES) == before else "FAILED",
                                           time.monotonic() - t0), flush=True)
    code, message = c.comm.async_error()
    check(code == fusedcomm.SUCCESS, "the suite's communicator ends healthy: %s" % message)
    c.comm.destroy()
    dist.destroy_process_group()
    print("rank %d: %d checks, %d failed" % (c.rank, CHECKS[0], len(FAILURES)), flush=True)
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
