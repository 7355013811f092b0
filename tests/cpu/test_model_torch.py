"""tools/bench-model's sharded math on the CPU: 2 processes (gloo), float32, a small
Llama-style config (and a Qwen-style one with q/k/v bias, KV heads replicated, TP 4's
shapes emulated on 2 ranks); the variants that run without a GPU, checked by the
benchmark's own check() against the unsharded model:

  nccl            Megatron TP: all_reduce + residual + RMSNorm (torch.distributed)
  torch-async-tp  sequence parallel in functional collectives (the layer that
                  torch.compile's micro-pipeline TP fuses; uncompiled here)
  bound, bound-sp the communication left out: must NOT match at 2 ranks (the check
                  sees a missing all-reduce)

at prefill (one and two sequences) and a decode step over a KV cache; and the SP layer
compiled as torch-async-tp compiles it (fullgraph: dynamo traces it whole; aot_eager:
no code generation), at prefill, and nccl, bound and bound-sp in their -compiled forms
(automatic dynamic shapes, two prefills); the breakdown's flow on torch.profiler (breakdown_lines).
Also: bench-model's flags (--quick and what overrides it, --variants, --breakdown),
fusedcomm.async_tp's routing of the forms ours does not take.
Exit 77 (skip) without torch."""
import importlib.machinery
import importlib.util
import os
import socket
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(root, "python"))
try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    print("SKIP: torch is not installed for %s (the sharded-math test needs it)" % sys.executable)
    sys.exit(77)
if not dist.is_available() or not dist.is_gloo_available():
    print("SKIP: this torch has no gloo backend")
    sys.exit(77)


def load_bench():
    path = os.path.join(root, "tools", "bench-model")
    loader = importlib.machinery.SourceFileLoader("bench_model", path)
    spec = importlib.util.spec_from_loader("bench_model", loader)
    mod = importlib.util.module_from_spec(spec)
    # In sys.modules before it runs, as an import would put it: dynamo, tracing the
    # variants' methods (the -compiled forms), imports their module by name for its globals.
    sys.modules["bench_model"] = mod
    loader.exec_module(mod)
    return mod


CASES = [  # (name, config overrides, --tp-shapes, prefill sequences)
    ("llama-style", dict(preset="tiny", hidden=64, intermediate=96, heads=4, kv_heads=2, head_dim=16, layers=2,
                         vocab=100), 2, 1),
    ("llama-style, 2 sequences", dict(preset="tiny", hidden=64, intermediate=96, heads=4, kv_heads=2, head_dim=16,
                                      layers=2, vocab=100), 2, 2),
    ("qwen-style bias, kv replicated", dict(preset="qwen2.5-7b", hidden=48, intermediate=64, heads=2, kv_heads=1,
                                            head_dim=8, layers=3, vocab=50), 2, 1),
    ("TP 4 shapes on 2 ranks", dict(preset="llama3-8b", hidden=64, intermediate=128, heads=8, kv_heads=4, head_dim=8,
                                    layers=2, vocab=64), 4, 1),
]


def breakdown_lines(bench, run, cfg):
    """bench-model's breakdown flow on the real torch.profiler (its Chrome trace, the
    record_function windows, the agreement between ranks), nccl and bound at a prefill of
    16 tokens: first as it is here (no GPU: no GPU activity, every variant left out with a
    note), then with the trace's CPU ops taken for GPU activity, so that the windows have
    something to split (gloo's c10d::allreduce_ op is communication by the rule table)."""
    cpu = torch.device("cpu")
    args = bench.parse_args(["--calls", "2"])
    variants, _ = run.variants(["nccl", "bound"])
    ids, attn = run.ids(16), bench.M.Attention.prefill(16, 1, cfg, cpu, torch.float32)
    fns = [lambda v=v: v.forward(ids, attn) for v in variants]
    blocks = [lambda fn=fn: [fn() for _ in range(args.calls)] for fn in fns]
    got, _, note = bench.breakdown_workload(run, variants, blocks, fns, "prefill", 16, args, cpu)
    lines = ["breakdown, no GPU|%s|%s" % (",".join(sorted(got)), note)]
    saved = bench.B.GPU_CATS
    bench.B.GPU_CATS = saved + ("cpu_op",)
    try:
        got, everyone, note = bench.breakdown_workload(run, variants, blocks, fns, "prefill", 16, args, cpu)
        # Decode's graph replays whose kernels the profiler does not see (blocks that run
        # nothing it records): the eager steps profiled instead, the mode saying so.
        unseen, _, unseen_note = bench.breakdown_workload(run, variants, [lambda: None] * len(fns), fns, "decode",
                                                          16, args, cpu)
    finally:
        bench.B.GPU_CATS = saved
    for name, (s, mode) in sorted(got.items()):
        lines.append("breakdown, CPU ops|%s|%s|%.6f|%.6f|%.6f|%d|%s" % (
            name, mode, sum(s["us"].values()), s["wall"], s["us"]["communication"], len(everyone), note))
    lines.append("breakdown, graphs unseen|%s|%s|%s" % (",".join(sorted(unseen)), ",".join(
        sorted(set(mode for _, mode in unseen.values()))), unseen_note))
    return lines


def worker(rank, world, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    bench = load_bench()
    M = bench.M
    lines = []
    for name, over, tp_shapes, seqs in CASES:
        preset = over.pop("preset")
        cfg = M.emulate(M.config(preset, **over), tp_shapes, world)
        over["preset"] = preset
        run = bench.Run(cfg, rank, world, torch.device("cpu"), dtype=torch.float32, seed=7, max_tokens=32,
                        eager_sp=True)
        variants, skipped = run.variants(["nccl", "torch-async-tp", "bound", "bound-sp"])
        checks = bench.check(run, variants, 16, seqs, 4, 8)
        for v, (e_abs, e_rel, note, broken) in checks.items():
            lines.append("%s|%s|%.3e|%.3e|%s|%s" % (name, v, e_abs, e_rel, note, broken))
        lines.append("%s|skipped|%s" % (name, sorted(skipped)))
        if name == "llama-style":
            # The SP layer as torch-async-tp compiles it: traced whole by dynamo (fullgraph), run
            # through AOTAutograd (no code generation here: aot_eager).
            run._compiled = torch.compile(M.layer_sp, fullgraph=True, dynamic=False, backend="aot_eager")
            run.eager_sp = False
            v = bench.TorchAsyncTp("torch-async-tp", run)
            v.strategy, v.compiled = run.functional_sp(), True
            ids, attn = run.ids(16), M.Attention.prefill(16, 1, cfg, torch.device("cpu"), torch.float32)
            got = run.gathered(v, run.step(v, ids, attn, 16, "prefill"))
            ref = M.forward(M.shard_weights(M.make_weights(cfg, 7, "cpu", torch.float32), cfg, 1, 0), M.local(cfg, 1),
                            cfg.eps, M.Unsharded, ids, attn)
            lines.append("%s, compiled|torch-async-tp|%.3e|%.3e||" % ((name,) + M.errors(got, ref)))
            # nccl and the bounds in their -compiled forms (CompiledForm: fullgraph, automatic
            # dynamic shapes), at two prefills: nccl-compiled must match, the bounds must not,
            # and the second prefill keeps the first's note where it generated no code.
            run.backend = "aot_eager"
            forms, skipped = run.variants(["nccl-compiled", "bound-compiled", "bound-sp-compiled"])
            lines.append("%s, compiled forms|skipped|%s" % (name, sorted(skipped)))
            weights = M.shard_weights(M.make_weights(cfg, 7, "cpu", torch.float32), cfg, 1, 0)
            for n in (16, 24):
                ids, attn = run.ids(n), M.Attention.prefill(n, 1, cfg, torch.device("cpu"), torch.float32)
                ref = M.forward(weights, M.local(cfg, 1), cfg.eps, M.Unsharded, ids, attn)
                for v in forms:
                    got = run.gathered(v, run.step(v, ids, attn, n, "prefill"))
                    lines.append("%s, compiled %d|%s|%.3e|%.3e||" % ((name, n, v.name) + M.errors(got, ref)))
            lines.append("%s, compiled notes|notes|%s" % (name, sorted(
                (k[0], k[1], note) for k, note in run.fused_ops.items() if k[0] in ("nccl-compiled", "bound-compiled"))))
            nccl = next(v for v in forms if v.name == "nccl-compiled")
            lines.append("%s, compiled applies|decode|%s" % (name, nccl.applies("decode", 8)))
            lines += breakdown_lines(bench, run, cfg)
    if rank == 0:
        with open(out, "w") as f:
            f.write("\n".join(lines) + "\n")
    dist.destroy_process_group()


failures = []


def expect(cond, what):
    print("%-78s %s" % (what, "OK" if cond else "FAIL"))
    if not cond:
        failures.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "checks.txt")
        mp.spawn(worker, args=(2, free_port(), out), nprocs=2)
        results = [line.split("|") for line in open(out).read().splitlines()]
    bd = [r for r in results if r[0].startswith("breakdown")]
    results = [r for r in results if not r[0].startswith("breakdown")]
    none = next(r for r in bd if r[0] == "breakdown, no GPU")
    expect(none[1] == "" and "no GPU activity of nccl, bound: left out" in none[2],
           "breakdown without GPU activity: every variant left out, with a note (%s)" % none[2])
    ops = {r[1]: r for r in bd if r[0] == "breakdown, CPU ops"}
    expect(sorted(ops) == ["bound", "nccl"], "breakdown on CPU ops: both variants split")
    for v, r in ops.items():
        total, wall, comm, ranks = float(r[3]), float(r[4]), float(r[5]), int(r[6])
        expect(abs(total - wall) < 1e-3 * wall and wall > 0, "breakdown %s: the parts sum to the window" % v)
        expect(r[2] == "eager" and ranks == 2 and r[7] == "", "breakdown %s: eager, every rank's split gathered" % v)
    expect(float(ops["nccl"][5]) > 0 and float(ops["bound"][5]) == 0,
           "breakdown: nccl's all-reduce is communication, the bound has none")
    g = next(r for r in bd if r[0] == "breakdown, graphs unseen")
    expect(g[1] == "bound,nccl" and g[2] == "eager (graph kernels not seen)" and
           "no kernels in the graph replays of nccl, bound: their eager steps profiled instead" in g[3],
           "breakdown: graph replays without kernels fall back to the eager steps, and say so")
    for r in results:
        if r[1] == "skipped":
            expect(r[2] == "[]", "%s: every variant set up on the CPU (skipped: %s)" % (r[0], r[2]))
            continue
        if r[1] == "notes":  # aot_eager generates no code: both prefills carry the first's note
            expect(r[2] == str([(k, n, "the generated code was not seen") for k in ("bound-compiled", "nccl-compiled")
                                for n in (16, 24)]), "compiled forms: a note per prefill (%s)" % r[2])
            continue
        if r[1] == "decode":
            expect(r[2] == "compiled: prefill only", "compiled forms skip decode (%s)" % r[2])
            continue
        name, variant, e_abs, e_rel, note, broken = r[0], r[1], float(r[2]), float(r[3]), r[4], r[5]
        expect(not broken, "%s: %s ran (%s)" % (name, variant, broken or "no error"))
        if variant in ("nccl", "nccl-compiled", "torch-async-tp"):
            # float32 through a few layers, the sums in another order: ~1e-6 of the scale.
            expect(e_rel < 1e-4, "%s: %s matches the unsharded model (rel err %.1e)" % (name, variant, e_rel))
            if "compiled" not in name:
                expect(note == "", "%s: %s checked at prefill and decode %s" % (name, variant, note))
        else:  # the bound leaves the other rank's partial sums out: wrong numbers
            expect(e_rel > 1e-2, "%s: %s differs from the unsharded model (rel err %.1e)" % (name, variant, e_rel))

    bench = load_bench()
    a = bench.parse_args(["--quick"])
    expect((a.preset, a.layers, a.prefill, a.decode, a.kv_len) == ("tiny", 2, [256, 1024], [1, 8, 32], 256),
           "--quick: the small preset and workloads")
    a = bench.parse_args(["--quick", "--preset", "llama3-8b", "--prefill=512", "--variants", "nccl,fc"])
    expect((a.preset, a.prefill, a.variants, a.decode) == ("llama3-8b", [512], ["nccl", "fc"], [1, 8, 32]),
           "--quick: flags given win")
    expect(bench.parse_args(["--quick"]).breakdown == "all", "--quick: the breakdown at every workload")
    a = bench.parse_args([])
    expect(a.breakdown == "all", "--breakdown: every workload by default (each missed target explained)")
    expect(bench.parse_args(["--breakdown", "prefill:2048,decode:8"]).breakdown == {("prefill", 2048), ("decode", 8)},
           "--breakdown: a list of workloads")
    expect(bench.parse_args(["--breakdown", ""]).breakdown == set(), "--breakdown '': none")
    expect(bench.parse_args(["--breakdown", "decode:8"]).breakdown == {("decode", 8)}, "--breakdown decode:8")
    a = bench.parse_args(["--decode", "", "--hidden", "2048"])
    expect(a.decode == [] and bench.M.config_from_args(a).hidden == 2048, "--decode '' and a config flag")

    # The PyTorch benchmarks' timing flags (fusedcomm.bench.parse_args): how replays start.
    import fusedcomm.bench as fb
    a = fb.parse_args(argv=[], tokens="1")
    expect((a.replays_start, fb.REPLAYS) == ("sync", {"start": "sync", "calls": 5}), "replays: sync, 5 calls by default")
    fb.parse_args(argv=["--replays-start", "barrier", "--calls", "20"], tokens="1")
    expect(fb.REPLAYS == {"start": "barrier", "calls": 20}, "--replays-start barrier --calls 20")
    fb.REPLAYS.update(start="sync", calls=5)

    # fusedcomm.async_tp: forms ours does not take go to torch's own implementation.
    import fusedcomm.async_tp as atp
    calls = []
    atp._TORCH_AG, atp._TORCH_RS = (lambda *a, **k: calls.append("ag")), (lambda *a, **k: calls.append("rs"))
    a16 = torch.zeros(4, 8, dtype=torch.bfloat16)
    b16 = torch.zeros(8, 6, dtype=torch.bfloat16)
    atp._all_gather_matmul(a16, [b16], 0, "not-opted-in")
    atp._ACTIVE["g"] = (None, 2)
    atp._all_gather_matmul(a16, [b16], 1, "g")  # gather_dim 1
    atp._all_gather_matmul(a16.float(), [b16.float()], 0, "g")  # fp32
    atp._matmul_reduce_scatter(a16, b16, "avg", 0, "g")
    atp._matmul_reduce_scatter(a16[:3], b16, "sum", 0, "g")  # rows not a multiple of 2
    atp._ACTIVE.clear()
    expect(calls == ["ag", "ag", "ag", "rs", "rs"], "async_tp: unsupported forms run torch's implementation")
    # The gathered A is written only where it is returned or the other Bs' matmuls read it.
    class FakeComm:
        def all_gather_matmul(self, a, b, c, m, n, k, dtype, trans_b, a_gathered=None, stream=0):
            gathered_args.append(a_gathered)
    gathered_args = []
    stream_of = atp._stream
    atp._stream = lambda t: 0
    atp._ACTIVE["g"] = (FakeComm(), 2)
    got_a, outs = atp._all_gather_matmul(a16, [b16], 0, "g", return_A=False)
    expect(got_a is None and gathered_args[-1] is None and outs[0].shape == (8, 6),
           "async_tp: return_A=False with one B passes no Agathered")
    got_a, outs = atp._all_gather_matmul(a16, [b16], 0, "g")
    expect(got_a is not None and got_a.shape == (8, 8) and gathered_args[-1] == got_a.data_ptr(),
           "async_tp: return_A (the default) gathers A into the returned tensor")
    got_a, outs = atp._all_gather_matmul(a16, [b16, b16], 0, "g", return_A=False)
    expect(got_a is None and gathered_args[-1] is not None and len(outs) == 2,
           "async_tp: a second B needs the gathered A even without return_A")
    atp._ACTIVE.clear()
    atp._stream = stream_of
    w, trans = atp._weight(torch.zeros(6, 8).t())
    expect(trans == atp.OP_T and w.shape == (6, 8) and w.is_contiguous(), "async_tp: B = W.t() read in place (OP_T)")
    expect(atp._weight(torch.zeros(8, 6))[1] == atp.OP_N, "async_tp: a row-major B [K, N] as OP_N")
    # Opting in puts ours in front of torch's CUDA kernels, once: a group opted out again
    # runs torch's implementation through ours (checked above), and opting in twice
    # registers nothing twice (torch refuses a second Python kernel for one key).
    atp._ACTIVE["g"] = (None, 2)
    atp._sync_registration()
    lib = atp._LIB
    ops = ("fused_all_gather_matmul", "fused_matmul_reduce_scatter")
    on = [torch._C._dispatch_dump("symm_mem::" + op) for op in ops]
    atp._ACTIVE.clear()
    atp._sync_registration()
    atp._ACTIVE["g"] = (None, 2)
    atp._sync_registration()
    atp._ACTIVE.clear()
    expect(all("CUDA: registered at %s" % atp.__file__ in d for d in on), "async_tp: ours is the CUDA kernel when on")
    expect(atp._LIB is lib, "async_tp: registered once")

    # FlashInfer's variant hands its fused kernel what vLLM would (64 / 2 / 0.5 MB of bf16
    # input at 2 / 4 / 8 ranks), its workspace sized for that, not for the longest prefill.
    fi = bench.flashinfer_fused_tokens
    expect(fi(2, 4096, 16384) == (8192, 64), "flashinfer: 2 ranks, hidden 4096: 8192 tokens fused (64 MB)")
    expect(fi(4, 8192, 16384) == (128, 2), "flashinfer: 4 ranks, hidden 8192: 128 tokens fused (2 MB)")
    expect(fi(8, 8192, 16384) == (32, 0.5), "flashinfer: 8 ranks, hidden 8192: 32 tokens fused (0.5 MB)")
    expect(fi(2, 4096, 512) == (512, 64), "flashinfer: never more tokens than the run's largest step")
    expect(fi(3, 16384, 16384)[1] == 0.5, "flashinfer: a world size vLLM does not list takes the smallest limit")
    expect(fi(8, 1 << 20, 16384)[0] == 1, "flashinfer: at least one token")

    print("FAILED: %s" % ", ".join(failures) if failures else "all sharded-math checks passed")
    sys.exit(1 if failures else 0)
