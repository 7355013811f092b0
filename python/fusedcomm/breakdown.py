"""Where a model step's time goes: tools/bench-model's per-part breakdown (issue 43: where
a target is missed, say which layer part takes the difference, measured). No torch
here: the benchmark hands in the trace torch.profiler exported, tools/report and the
CPU tests use the rest.

Each variant's timed block (the same `calls` steps: a CUDA graph replay for decode,
eager for prefill) runs once more under torch.profiler, inside a record_function range
of its own (WINDOW + the variant's name) that closes after a synchronize: the window is
the block's wall time. Every GPU activity (kernel, memcpy, memset) in the window is
classified by its name (RULES) into a part:

  gemm           cuBLAS / cuBLASLt / CUTLASS / inductor template GEMMs and GEMVs
  fused          ours, GEMM and communication in one kernel: the persistent engine's
                 GEMMs (fcAllGatherMatmul / fcMatmulReduceScatter) and the decode
                 GEMV + all-reduce (fcMatmulAllReduce)
  communication  NCCL, our collectives (the all-reduce + RMSNorm kernels too: the norm
                 rides in them), torch symm_mem's kernels, peer-to-peer copies
  attention      flash / memory-efficient / cuDNN SDPA kernels, softmax
  norm           RMSNorm kernels (a fused add + norm among them)
  other          everything else: the residual adds, rotary embedding, SwiGLU, copies
  idle           the window's time with no GPU activity: launch gaps, host work, the
                 synchronize at the end

The parts split the window exactly (they sum to it): where activities overlap (the
copy engine's pulls under a GEMM, kernels on two streams), the time goes to the first
part of PRIORITY that is running, communication last, so that communication counts
only where it is exposed (nothing else runs). kernel_us keeps each part's total
activity time, overlap included. Figures are per step (the window / calls) of rank 0.
"""
import sys

PARTS = ("gemm", "fused", "communication", "attention", "norm", "other", "idle")
PRIORITY = ("fused", "gemm", "attention", "norm", "other", "communication")

# (part, substrings): a name is lower-cased with its underscores dropped
# (one_shot_all_reduce -> oneshotallreduce) and the first rule with a substring in it
# wins, so the order matters: our engine's GEMMs are CUTLASS kernels (fused before
# gemm); the all-reduce + RMSNorm kernels say "norm" (communication before norm);
# PyTorch's flash and memory-efficient attention kernels say "cutlass" (attention
# before gemm). Kernel names: src/ (grep __global__; the engine's GemmUniversal has
# fc::engine's mainloop in its type; the profiler gives it mangled where the name is long:
# ...N2fc6engine15OwnRowsMainloop...), NCCL's ncclDevKernel_*, c10d::symmetric_memory::*.
RULES = (
    ("fused", ("fc::engine::", "fc6engine", "gemvallreducekernel")),
    ("communication", ("nccl", "allreduce", "reducescatter", "allgather", "lamport", "barrierkernel", "gatekernel",
                       "localreducekernel", "reducepartialskernel", "symmetricmemory", "multimem", "memcpy ptop")),
    ("attention", ("flash", "fmha", "sdpa", "attention", "softmax")),
    ("gemm", ("gemm", "gemv", "nvjet", "xmma", "cutlass", "cublas", "splitkreduce", "tritontem")),
    ("norm", ("norm", "rsqrt")),
)
# Inductor's generated kernels (the -compiled and async-TP variants) are named after every
# op whose code they hold or read: triton_poi_fused_matmul_all_reduce_residual_rmsnorm_
# mul_silu_split is SwiGLU on our op's output, triton_poi_fused__scaled_dot_product_cudnn_
# attention_add_cat_mul_neg_slice the rotary embedding feeding attention. So they get
# rules of their own: templates (triton_tem_) are GEMMs, a reduction with an rsqrt an
# RMSNorm, any other one is pointwise work.
TRITON_RULES = (("gemm", ("tritontem",)), ("norm", ("rsqrt",)))
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")  # the Chrome trace's categories of GPU activity
WINDOW = "bench-model breakdown: "  # the record_function ranges' prefix
# Issue 43's targets: ours (the best of fc and fc-sp, eager or compiled) within this factor
# of the bound.
TARGETS = {"decode": 1.03, "prefill": 1.05}
OURS = ("fc", "fc-compiled", "fc-sp", "fc-sp-compiled")

# tools/bench-model --breakdown-csv's columns (one row per variant, workload and part).
FIELDS = ("preset", "hidden", "intermediate", "layers", "tp_shapes", "ranks", "phase", "tokens", "kv_len", "variant",
          "part", "us", "kernel_us", "kernels", "excess_us", "bound", "profiled_step_us", "step_us", "mode")


def classify(name, bound=False):
    """The part of a GPU activity by its name (RULES). A bound has no communication:
    the one kernel of ours it runs, the fused residual + RMSNorm on a 1-rank communicator
    (bound-fc), counts as norm."""
    key = name.lower().replace("_", "")
    rules = TRITON_RULES if key.startswith("triton") else RULES
    part = next((p for p, subs in rules if any(s in key for s in subs)), "other")
    if bound and part == "communication" and "norm" in key:
        return "norm"
    return part


def gpu_activities(events):
    """(name, start, end) of every GPU activity of a Chrome trace's events (us)."""
    return [(e["name"], float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events
            if e.get("ph") == "X" and e.get("cat") in GPU_CATS]


def windows(events, prefix=WINDOW):
    """{label: (start, end)} of the record_function ranges named prefix + label."""
    return {e["name"][len(prefix):]: (float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
            if e.get("cat") == "user_annotation" and e.get("name", "").startswith(prefix)}


def split(activities, start, end, bound=False, top=3):
    """Where the window [start, end) goes: {us: {part: time} (PARTS, summing to the
    window), kernel_us: {part: the activities' total time, overlap included}, kernels:
    {part: count}, wall, top: {part: [[name, time], ...] its largest activities by
    name}}. Activities are clipped to the window; those outside it are left out."""
    edges, kernel_us, kernels, by_name = [], dict.fromkeys(PRIORITY, 0.0), dict.fromkeys(PRIORITY, 0), {}
    for name, s, e in activities:
        s, e = max(s, start), min(e, end)
        if e <= s:
            continue
        part = classify(name, bound)
        kernel_us[part] += e - s
        kernels[part] += 1
        by_name.setdefault(part, {})
        by_name[part][name] = by_name[part].get(name, 0.0) + e - s
        edges += [(s, 1, part), (e, -1, part)]
    edges.sort(key=lambda x: x[0])
    us, active, last = dict.fromkeys(PARTS, 0.0), dict.fromkeys(PRIORITY, 0), start
    for t, step, part in edges:
        if t > last:  # [last, t): the first running part of PRIORITY, else idle
            us[next((p for p in PRIORITY if active[p]), "idle")] += t - last
            last = t
        active[part] += step
    us["idle"] += end - last
    tops = {p: [[n, x] for n, x in sorted(names.items(), key=lambda kv: -kv[1])[:top]] for p, names in by_name.items()}
    return dict(us=us, kernel_us=kernel_us, kernels=kernels, wall=end - start, top=tops)


def per_step(summary, calls):
    """A split() of a block of `calls` steps, per step."""
    def div(d):
        return {k: v / calls for k, v in d.items()}
    return dict(us=div(summary["us"]), kernel_us=div(summary["kernel_us"]), kernels=div(summary["kernels"]),
                wall=summary["wall"] / calls,
                top={p: [[n, x / calls] for n, x in names] for p, names in summary["top"].items()})


def _num(x):
    return float(x) if x not in ("", None) else None


def rows(records, timed, base):
    """The --breakdown-csv rows: records [(phase, tokens, kv_len, variant, step summary,
    mode)], timed {(phase, tokens, variant): step_us of the timed rounds}; base: the
    model's columns. excess_us: the part's time over the bound's (the fastest bound
    of the timed rounds among those profiled at the workload)."""
    out, by = [], {}
    for rec in records:
        by.setdefault(rec[:2], []).append(rec)
    for (phase, n), recs in by.items():
        bounds = [r for r in recs if r[3].startswith("bound") and timed.get((phase, n, r[3]))]
        bound = min(bounds, key=lambda r: timed[(phase, n, r[3])]) if bounds else None
        for _, _, kv_len, variant, s, mode in recs:
            for part in PARTS:
                x = s["us"][part]
                excess = "" if bound is None or variant.startswith("bound") else round(x - bound[4]["us"][part], 1)
                out.append(dict(base, phase=phase, tokens=n, kv_len=kv_len, variant=variant, part=part,
                                us=round(x, 1), kernel_us=round(s["kernel_us"][part], 1) if part != "idle" else "",
                                kernels=round(s["kernels"][part], 2) if part != "idle" else "", excess_us=excess,
                                bound=bound[3] if bound else "", profiled_step_us=round(s["wall"], 1),
                                step_us=timed.get((phase, n, variant), ""), mode=mode))
    return out


GEMM_WORK = "gemm+fused"  # the verdicts' part for the GEMM work, alone or fused with communication


def verdicts(timed_rows, bd_rows):
    """Per workload of the timed rows (tools/bench-model's CSV rows) where ours ran and a
    bound did: ours (the best of fc and fc-sp, eager or compiled), its ratio to the fastest bound, the
    target, whether it is missed, and from the breakdown rows (if the workload was
    profiled) every part's excess over the bound, gemm and fused taken together
    (GEMM_WORK), and the part with the largest: the part that takes the difference."""
    out, loads = [], []
    for r in timed_rows:
        if (r["phase"], str(r["tokens"])) not in loads:
            loads.append((r["phase"], str(r["tokens"])))
    for phase, n in loads:
        t = {r["variant"]: _num(r["step_us"]) for r in timed_rows
             if r["phase"] == phase and str(r["tokens"]) == n and _num(r["step_us"])}
        bounds = {k: x for k, x in t.items() if k.startswith("bound")}
        mine = {k: t[k] for k in OURS if k in t}
        if not bounds or not mine:
            continue
        ours = min(mine, key=mine.get)
        bound = min(bounds, key=bounds.get)
        ratio = mine[ours] / bounds[bound]
        v = dict(phase=phase, tokens=int(n), ours=ours, bound=bound, ratio=ratio, target=TARGETS.get(phase),
                 timed_diff=mine[ours] - bounds[bound], profiled=False)
        v["missed"] = v["target"] is not None and ratio > v["target"]
        here = [r for r in bd_rows if r["phase"] == phase and str(r["tokens"]) == n]
        parts = {r["part"]: r for r in here if r["variant"] == ours}
        if parts and all(r["excess_us"] not in ("", None) for r in parts.values()):
            excess = {p: float(parts[p]["excess_us"]) for p in PARTS if p in parts}
            # A fused kernel does a GEMM's work too (it replaces the bound's GEMM): it is
            # charged only its time over the GEMMs it replaces.
            excess = dict([(GEMM_WORK, excess.pop("gemm", 0.0) + excess.pop("fused", 0.0))] + list(excess.items()))
            row = next(iter(parts.values()))
            bound_wall = next((_num(r["profiled_step_us"]) for r in here if r["variant"] == row["bound"]), None)
            v.update(profiled=True, excess=excess, part=max(excess, key=excess.get), bd_bound=row["bound"],
                     profiled_diff=_num(row["profiled_step_us"]) - bound_wall if bound_wall else None,
                     mode=row["mode"])
        out.append(v)
    return out


def difference_text(v):
    """One verdict's breakdown in words: 'communication +A us (the largest), gemm +B, ...;
    in all +X us over bound-fc profiled, +Y timed' (parts that did not change left out)."""
    if not v["profiled"]:
        return "not profiled (tools/bench-model --breakdown)"
    rest = ", ".join("%s %+.1f" % (p, x) for p, x in v["excess"].items() if p != v["part"] and abs(x) >= 0.05)
    return "%s %+.1f us (the largest)%s; in all %+.1f us over %s profiled, %+.1f timed" % (
        v["part"], v["excess"][v["part"]], (", " + rest) if rest else "", v["profiled_diff"] or 0.0, v["bd_bound"],
        v["timed_diff"])


def print_table(bd_rows, timed_rows, out=sys.stdout):
    """The breakdown per profiled workload (us per step, rank 0), then where ours misses
    its target, which part takes the difference."""
    loads = []
    for r in bd_rows:
        if (r["phase"], r["tokens"]) not in loads:
            loads.append((r["phase"], r["tokens"]))
    for phase, n in loads:
        group = [r for r in bd_rows if r["phase"] == phase and r["tokens"] == n]
        mode = group[0]["mode"]
        out.write("\nbreakdown: %s %d (us per step, rank 0, %s; excess over %s in brackets)\n%-15s %s %9s %9s\n" % (
            phase, n, mode, group[0]["bound"] or "no bound", "variant", " ".join("%-17s" % p for p in PARTS),
            "profiled", "timed"))
        for variant in dict.fromkeys(r["variant"] for r in group):
            by = {r["part"]: r for r in group if r["variant"] == variant}
            cells = ["%7.1f%s" % (by[p]["us"], " (%+6.1f)" % by[p]["excess_us"] if by[p]["excess_us"] != "" else "")
                     for p in PARTS]
            first = by[PARTS[0]]
            out.write("%-15s %s %9.1f %9s\n" % (variant, " ".join("%-17s" % c for c in cells),
                                                first["profiled_step_us"], first["step_us"] or "-"))
    vs = verdicts(timed_rows, bd_rows)
    missed = [v for v in vs if v["missed"]]
    out.write("\nwhere ours misses its target (decode %.2fx, prefill %.2fx the bound), which part takes the "
              "difference:\n" % (TARGETS["decode"], TARGETS["prefill"]))
    if not missed:
        out.write("  nowhere: ours meets the target at every workload\n")
    for v in missed:
        out.write("  %s %d: %s %.3fx %s; %s\n" % (v["phase"], v["tokens"], v["ours"], v["ratio"], v["bound"],
                                                  difference_text(v)))
    out.flush()


def write_csv(rows_, path):
    with open(path, "w") as f:
        f.write(",".join(FIELDS) + "\n")
        for r in rows_:
            f.write(",".join(str(r.get(k, "")).replace(",", ";") for k in FIELDS) + "\n")
