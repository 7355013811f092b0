"""fusedcomm.model without torch (it imports without it): the presets' numbers (the
public config.json files), config flags over a preset, every weight's per-rank shape at
TP 2, 4 and 8, the errors where a dimension does not divide, --tp-shapes emulation, and
tools/bench-model's rows: the ratios filled in per workload and the CSV written."""
import argparse
import csv
import io
import os
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(root, "python"))
from fusedcomm import model as M  # noqa: E402

failures = []


def expect(cond, what):
    print("%-78s %s" % (what, "OK" if cond else "FAIL"))
    if not cond:
        failures.append(what)


def raises(fn, text):
    try:
        fn()
    except ValueError as e:
        return text in str(e)
    return False


# Presets: hidden, intermediate, heads, kv heads, head_dim, vocab, bias.
want = {"llama3-8b": (4096, 14336, 32, 8, 128, 128256, False), "llama3-70b": (8192, 28672, 64, 8, 128, 128256, False),
        "qwen2.5-7b": (3584, 18944, 28, 4, 128, 152064, True), "qwen2.5-32b": (5120, 27648, 40, 8, 128, 152064, True)}
for name, w in want.items():
    c = M.config(name)
    expect((c.hidden, c.intermediate, c.heads, c.kv_heads, c.head_dim, c.vocab, c.qkv_bias) == w, "preset " + name)
    expect(c.heads * c.head_dim == c.hidden, "preset %s: heads x head_dim = hidden" % name)
    expect(c.layers == M.DEFAULT_LAYERS, "preset %s: %d layers by default" % (name, M.DEFAULT_LAYERS))
expect(M.config("llama3-8b").rope_theta == 500000.0 and M.config("qwen2.5-7b").rope_theta == 1e6, "rope theta")
expect(raises(lambda: M.config("llama4"), "unknown preset"), "unknown preset refused")
expect(raises(lambda: M.config("llama3-8b", heads=30), "multiple of kv_heads"), "heads not a multiple of kv heads")
expect(raises(lambda: M.config("llama3-8b", layers=0), "positive"), "zero layers refused")

# Flags override every field; the rest stays the preset's.
ap = argparse.ArgumentParser()
M.add_config_args(ap)
c = M.config_from_args(ap.parse_args(["--preset", "qwen2.5-32b", "--hidden", "2048", "--intermediate", "8192",
                                      "--heads", "16", "--kv-heads", "4", "--head-dim", "64", "--layers", "3",
                                      "--vocab", "1000", "--qkv-bias", "off", "--eps", "1e-6"]))
expect((c.hidden, c.intermediate, c.heads, c.kv_heads, c.head_dim, c.layers, c.vocab, c.qkv_bias, c.eps) ==
       (2048, 8192, 16, 4, 64, 3, 1000, False, 1e-6), "every config flag overrides its field")
expect(c.rope_theta == 1e6 and c.name == "qwen2.5-32b", "fields not given stay the preset's")
expect(M.config_from_args(ap.parse_args([])) == M.config("llama3-8b"), "no flags: llama3-8b")

# Per-rank shapes (nn.Linear weights [out, in]).
s = M.shard_shapes(M.config("llama3-8b"), 2)
expect(s["qkv_proj"] == ((16 + 2 * 4) * 128, 4096) and s["o_proj"] == (4096, 2048), "llama3-8b TP 2: attention")
expect(s["gate_up_proj"] == (2 * 7168, 4096) and s["down_proj"] == (4096, 7168), "llama3-8b TP 2: MLP")
expect(s["kv_cache"] == (4, 128) and "qkv_bias" not in s and s["norm"] == (4096,), "llama3-8b TP 2: cache, no bias")
s = M.shard_shapes(M.config("llama3-8b"), 8)
expect(s["qkv_proj"] == ((4 + 2) * 128, 4096) and s["down_proj"] == (4096, 1792), "llama3-8b TP 8")
s = M.shard_shapes(M.config("llama3-70b"), 8)
expect(s["qkv_proj"] == ((8 + 2) * 128, 8192) and s["o_proj"] == (8192, 1024) and s["gate_up_proj"] == (7168, 8192),
       "llama3-70b TP 8")
s = M.shard_shapes(M.config("qwen2.5-32b"), 4)
expect(s["qkv_proj"] == ((10 + 4) * 128, 5120) and s["qkv_bias"] == (14 * 128,) and s["down_proj"] == (5120, 6912),
       "qwen2.5-32b TP 4, with the q/k/v bias")
s = M.shard_shapes(M.config("qwen2.5-7b"), 4)
expect(s["qkv_proj"] == ((7 + 2) * 128, 3584) and s["kv_cache"] == (1, 128), "qwen2.5-7b TP 4")
s = M.shard_shapes(M.config("llama3-8b", kv_heads=2), 8)
expect(s["kv_cache"] == (1, 128) and s["qkv_proj"] == ((4 + 2) * 128, 4096), "KV heads replicated past TP = kv heads")
for name in want:
    for tp in (2, 4, 8):
        c = M.config(name)
        try:
            s = M.shard_shapes(c, tp)
        except ValueError:
            expect(name == "qwen2.5-7b" and tp == 8, "%s TP %d shards" % (name, tp))
            continue
        lo = M.local(c, tp)
        expect(s["o_proj"][1] * tp == c.heads * c.head_dim and s["down_proj"][1] * tp == c.intermediate,
               "%s TP %d: the row-parallel weights cover the model" % (name, tp))
        expect(lo.kv_heads * tp == c.kv_heads, "%s TP %d: the KV heads split" % (name, tp))
expect(raises(lambda: M.shard_shapes(M.config("qwen2.5-7b"), 8), "heads (28) not a multiple of 8"),
       "qwen2.5-7b TP 8: heads do not divide")
expect(raises(lambda: M.local(M.config("llama3-8b", intermediate=1000), 16), "intermediate (1000)"),
       "intermediate not a multiple of TP")
expect(raises(lambda: M.local(M.config("llama3-8b", heads=48, kv_heads=6), 4), "kv_heads (6)"),
       "KV heads neither split nor replicated evenly")

# --tp-shapes: TP N's per-rank shapes on the ranks that exist.
c = M.config("llama3-70b")
e = M.emulate(c, 8, 2)
expect(M.local(e, 2) == M.local(c, 8), "llama3-70b: TP 8's per-rank shapes at 2 ranks")
expect((e.heads, e.kv_heads, e.intermediate, e.hidden) == (16, 2, 7168, 8192), "the emulated model's config")
expect(M.emulate(c, 2, 2) is c, "--tp-shapes = the world: the model itself")
expect(raises(lambda: M.emulate(c, 3, 2), "multiple of the world size"), "--tp-shapes not a multiple of the world")

# bench-model's rows: ratios per workload, CSV.
rows = []
for phase, n, times in (("decode", 8, dict(nccl=200.0, fc=150.0, bound=140.0, **{"bound-sp": 145.0, "fc-sp": ""})),
                        ("prefill", 512, dict(nccl=1000.0, fc=900.0, bound=850.0))):
    for v, t in times.items():
        rows.append(dict(preset="llama3-8b", phase=phase, tokens=n, seqs=1, kv_len=2048, variant=v, step_us=t,
                         layer_us=t and t / 4, tokens_per_s=t and n / t * 1e6, note="x,y" if v == "fc" else ""))
M.summarize(rows)
fc = next(r for r in rows if r["variant"] == "fc" and r["phase"] == "decode")
expect((fc["vs_nccl"], fc["vs_best_other"], fc["over_bound"]) == ("1.333", "1.333", "1.071"),
       "ratios: vs nccl, vs the best other, over the fastest bound")
b = next(r for r in rows if r["variant"] == "bound-sp")
expect(b["vs_best_other"] == "" and b["over_bound"] == "1.036", "bounds: no speed-up figure, their own ratio")
expect(not next(r for r in rows if r["variant"] == "fc-sp").get("vs_nccl"), "a skipped row gets no ratio")
p = next(r for r in rows if r["variant"] == "fc" and r["phase"] == "prefill")
expect(p["vs_nccl"] == "1.111" and p["over_bound"] == "1.059", "ratios within each workload")
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "model-2.csv")
    M.write_csv(rows, path)
    back = list(csv.DictReader(open(path)))
expect(list(back[0].keys()) == list(M.CSV_FIELDS) and len(back) == len(rows), "CSV: the header, a row per row")
expect(next(r for r in back if r["variant"] == "fc")["note"] == "x;y", "CSV: commas in notes do not split cells")
out = io.StringIO()
M.print_table(rows, out)
expect("decode batch" in out.getvalue() and "prefill 512 tokens" in out.getvalue(), "the table prints")

print("FAILED: %s" % ", ".join(failures) if failures else "all model config checks passed")
sys.exit(1 if failures else 0)
