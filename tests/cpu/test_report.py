"""tools/report on a committed sample of benchmark output (tests/data/report-sample):
the report has its summary, every section the sample feeds, figures taken from the
sample's rows (not invented), links to the raw files with their commands, each plot
is a PNG, and README's marked block is rewritten between its markers, the rest of
the file untouched. Exit 77 (skip) without matplotlib (tools/install-deps installs it)."""
import os
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sample = os.path.join(root, "tests", "data", "report-sample")
try:
    import matplotlib  # noqa: F401
except ImportError:
    # Another python3 first on PATH (pyenv, a venv): the system's has the apt package.
    system = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(system) and os.path.exists(system) and \
            subprocess.run([system, "-c", "import matplotlib"], capture_output=True).returncode == 0:
        os.execv(system, [system] + sys.argv)
    print("SKIP: matplotlib is not installed for %s (tools/install-deps installs python3-matplotlib)" % sys.executable)
    sys.exit(77)

failures = []


def expect(cond, what):
    print("%-70s %s" % (what, "OK" if cond else "FAIL"))
    if not cond:
        failures.append(what)


with tempfile.TemporaryDirectory() as tmp:
    readme = os.path.join(tmp, "README.md")
    with open(readme, "w") as f:
        f.write("# title\n\nbefore\n<!-- report:begin -->\nstale figures\n<!-- report:end -->\nafter\n")
    perf, plots = os.path.join(tmp, "docs", "perf.md"), os.path.join(tmp, "docs", "perf")
    os.makedirs(os.path.dirname(perf))
    subprocess.run([sys.executable, os.path.join(root, "tools", "report"), sample, "--perf", perf, "--plots", plots,
                    "--readme", readme], check=True)
    text = open(perf).read()
    for heading in ("## Summary", "## All-reduce (bf16, 2 ranks)", "## Bus bandwidth (bf16, 2 ranks)",
                    "## All-gather + GEMM from PyTorch (bf16, 2 ranks)", "## All-gather + GEMM (fc-bench",
                    "## GEMM + reduce-scatter (fc-bench", "## The GEMM engine's kernel alone"):
        expect(heading in text, "section " + heading)
    expect("commit 8184aaf" in text and "2x NVIDIA H200" in text, "stamped with device and commit")
    # A row of the sample, as the table must show it (8 B all-reduce: ours 2.87, NCCL 5.63).
    expect("| 8 B | auto | 2.87 | 5.63 | 1.965 |" in text, "all-reduce row from the sample")
    expect("| 512 x 3072 x 4096 | 19.6 | 46.4 | 47.3 | 32.6 | 31.6 | 0.703 |" in text, "torch row from the sample")
    link = text.split("[allreduce-2.csv](", 1)[-1].split(")", 1)[0]
    expect(os.path.exists(os.path.join(os.path.dirname(perf), link)), "link to a raw file resolves: " + link[-40:])
    expect("`fcrun -n 2 -- fc-bench allreduce -d bf16 -b 8 -e 256M --csv`" in text, "commands quoted")
    # 2048 x 3072 x 4096 in the sample: ours 110.5 against torch's 96.6 -> listed as a loss.
    expect("all-gather + GEMM 2048 x 3072 x 4096: 1.14x" in text, "losses listed")
    # GEMM + all-reduce (+ RMSNorm), fc-bench and PyTorch (made-up sample rows): the forced
    # reduce-scatter path's column joined from mmar-fused-2.csv; the norm form's unfused
    # pair is GEMM + ours (NCCL's column has no norm), so 231.00 against 225.20 is a loss.
    expect("## GEMM + all-reduce (+ residual + RMSNorm) (fc-bench mmar, bf16, 2 ranks)" in text, "section mmar")
    expect("| - | 2048 x 4096 x 7168 | T | 154.10 | 240.30 | 215.60 | 190.20 | 1.234 | 36.10 | 1.134 | 176.40 |" in text,
           "mmar row from the sample")
    expect("GEMM + all-reduce + RMSNorm 2048 x 4096 x 7168 (B T): 1.03x the unfused pair's time" in text,
           "mmar loss listed")
    expect("## GEMM + all-reduce + residual + RMSNorm from PyTorch (bf16, 2 ranks)" in text, "section torch-mmar")
    expect("| llama3-8b.o_proj | 1 | 5.90 | 18.40 | 9.50 | 10.80 | 8.20 | 1.390 | 2.30 | 0.863 | 24.40 | 30.10 |"
           in text, "torch-mmar row from the sample")
    expect("llama3-8b.down_proj M = 2048: 1.05x the time of torch.matmul + our all-reduce + RMSNorm" in text,
           "torch-mmar loss listed")
    for name in ("allreduce-2.png", "busbw-2.png", "agmm-torch-2.png"):
        path = os.path.join(plots, name)
        ok = os.path.exists(path) and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
        expect(ok, "plot " + name)
        expect("](perf/%s)" % name in text, "plot %s linked" % name)
    # The model section (tools/bench-model's model-2.csv in the sample): every variant that ran,
    # the bound (the fastest of bound, bound-fc, bound-sp), ours (the better of fc and fc-sp)
    # over it, the best other variant (nccl, flashinfer, torch-async-tp) over ours.
    expect("## The model: llama3-8b, 4 layers, 2 ranks (tools/bench-model, bf16)" in text, "section model")
    row = ("| prefill 2048 | 4870.5 | 4702.2 | 4566.0 | 4490.1 | 4601.9 | 4291.2 | 1.046 | 1.047 | 1.085 "
           "| 1.022 |")
    expect(row in text, "model row from the sample")
    expect("| decode 1 | 402.1 | - | 331.9 | - | - | 316.5 | 1.049 | 1.212 | 1.212 | - |" in text,
           "model row with skipped variants")
    expect("flashinfer: FlashInfer not importable" in text, "model: skipped variants say why")
    expect("model (llama3-8b, 4 layers, 2 ranks): ours 1.04-1.05x the communication-free bound" in text,
           "model headline")
    path = os.path.join(plots, "model-2.png")
    expect(os.path.exists(path) and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "plot model-2.png")
    # The model's breakdown (model-2-breakdown.csv, made-up rows): where ours misses the
    # target (decode 1.03x: decode 1, 8 and 32 in the sample; prefill 2048 meets 1.05x), the
    # part that takes the difference, the GEMM work taken together: decode 1, gemm+fused
    # (120 + 128) - 240 = +8.0 against idle +9.5 -> idle; decode 32, communication +30.0.
    expect("### Where the step's time goes: llama3-8b, 4 layers, 2 ranks" in text, "section model breakdown")
    expect("| decode 1 | fc | 1.049 | 1.03 | +15.4 | +15.5 | **idle** | +9.5 | gemm+fused +8.0, norm -2.0 |"
           in text, "breakdown: decode 1's difference taken by idle, from the sample")
    expect("| decode 32 | fc | 1.043 | 1.03 | +14.4 | +14.5 | **communication** | +30.0 | norm -18.0, idle +2.5 |"
           in text, "breakdown: decode 32's taken by communication")
    expect("| decode 8 | fc | 1.050 | 1.03 | +16.1 | - | not profiled |" in text, "breakdown: a miss not profiled")
    expect("| prefill 2048 | fc" not in text.split("### Where the step's time goes")[1].split("| workload | variant")[0],
           "breakdown: a workload that meets its target is not in the difference table")
    expect("| decode 32 | fc-sp | 30.0 (-220.0) | 240.0 (+240.0) | 20.0 (+20.0) | 50.0 (+0.0) | 10.0 (-10.0) "
           "| 5.0 (-11.0) | 7.0 (+3.0) | 362.0 | 360.1 | graph |" in text, "breakdown: a variant's parts and excess")
    expect("## The model: llama3-8b, 4 layers, 2 ranks (tools/bench-model, bf16)" in text and
           text.count("## The model:") == 1, "the breakdown CSV is not a model part of its own")
    path = os.path.join(plots, "model-2-breakdown.png")
    expect(os.path.exists(path) and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n" and
           "](perf/model-2-breakdown.png)" in text, "plot model-2-breakdown.png, linked")
    new = open(readme).read()
    expect(new.startswith("# title\n\nbefore\n<!-- report:begin -->\nMeasured 2026-11-23"), "README block rewritten")
    expect("stale figures" not in new and new.endswith("<!-- report:end -->\nafter\n"), "README outside the block kept")

# A one-rank sample (tests/data/report-sample-1rank): the all-reduce + RMSNorm section
# and its rows; no section for what the folder lacks.
with tempfile.TemporaryDirectory() as tmp:
    perf = os.path.join(tmp, "perf.md")
    subprocess.run([sys.executable, os.path.join(root, "tools", "report"), sample + "-1rank", "--perf", perf,
                    "--plots", os.path.join(tmp, "perf"), "--readme", ""], check=True)
    text = open(perf).read()
    expect("## All-reduce + residual + RMSNorm (fc-bench arnorm, bf16, 1 ranks)" in text, "section arnorm")
    expect("| 1 | 4096 | 8 KiB | 4.36 | 5.35 | 5.23 | 2.77 | 1.43 | 1.59 | 1.198 |" in text, "arnorm row from the sample")
    expect("all-reduce + RMSNorm at 1 x 4096: 1.59 us over the all-reduce alone" in text, "arnorm loss listed")
    expect("## All-reduce (bf16" not in text, "no section without its file")

# A 2-rank sample of fc-bench agmmstages (tests/data/report-sample-share): its section,
# a row with the differences computed from the sample (waits = engine - no-wait, pulls =
# no-wait - no-pull, fixed = no-pull - GEMM alone).
with tempfile.TemporaryDirectory() as tmp:
    perf = os.path.join(tmp, "perf.md")
    subprocess.run([sys.executable, os.path.join(root, "tools", "report"), os.path.join(root, "tests", "data",
                    "report-sample-share"), "--perf", perf, "--plots", os.path.join(tmp, "perf"), "--readme", ""],
                   check=True)
    text = open(perf).read()
    expect("## Where the all-gather + GEMM engine's time goes (fc-bench agmmstages, bf16, 2 ranks)" in text,
           "section agmmstages")
    expect("| 2048 x 3072 x 4096 | 78.8 | 4564.0 | 4566.9 | 4575.3 | +0.9 | +3.2 | +4481.1 | 4598.7 | 57.919 | 0 |"
           in text, "agmmstages row from the sample")

    # mmrsstages: waits = engine - no-gate, pulls = engine - no-pull, fixed = gemm-only - GEMM alone.
    expect("## Where the GEMM + reduce-scatter engine's time goes (fc-bench mmrsstages, bf16, 2 ranks)" in text,
           "section mmrsstages")
    # (The sample predates the epilogue-add column: "-".)
    expect("| 2048 x 4096 x 2048 | 48.0 | 4527.0 | +2228.2 | +4.3 | +2249.6 | - | 4542.3 | 94.312 | 0 |" in text,
           "mmrsstages row from the sample")

print("FAILED: %s" % ", ".join(failures) if failures else "all report checks passed")
sys.exit(1 if failures else 0)
