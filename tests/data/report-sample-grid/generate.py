#!/usr/bin/env python3
"""Writes this folder's CSVs: SYNTHETIC numbers for tests/cpu/test_report.py (the decode
grid section of tools/report), made from the fixed ratios below - no GPU measured them.
A small grid (hidden 2048, 4096, 8192 x tokens 1, 3, 17, 128, 255, 2048) in the columns the
benchmarks write; FlashInfer 'absent' (0) at 2048 x 8192, as where it refuses a shape; and
push-rate.csv, tools/probes/push-rate's rows for the all-reduce's sizes from 8 KiB to 4 MiB
(the bound the report sets the missed cells beside) and its minimal fused kernel's at the
cells of 1-128 rows (the all-reduce + RMSNorm's bound).
Rerun after changing a benchmark's columns, then update the rows test_report.py expects."""
import os

HIDDEN = (2048, 4096, 8192)
TOKENS = (1, 3, 17, 128, 255, 2048)
# ours / FlashInfer per hidden, per token count (all-reduce, then all-reduce + RMSNorm).
AR = {2048: (0.80, 0.82, 0.85, 0.90, 0.93, 0.97), 4096: (0.78, 0.80, 0.88, 0.96, 0.94, 1.05),
      8192: (0.81, 0.83, 0.92, 0.99, 1.08, 0.94)}
# The fastest Lamport one-shot (push-rate's lamport-cta-pdl row) / FlashInfer, per cell.
BOUND = {2048: (0.90,) * 6, 4096: (0.90, 0.90, 0.90, 0.97, 0.90, 0.90), 8192: (0.90, 0.90, 0.90, 0.93, 0.96, 0.90)}
NORM = {2048: (0.90, 0.92, 0.94, 0.96, 0.93, 0.91), 4096: (0.85, 0.97, 0.93, 0.94, 1.04, 0.92),
        8192: (0.88, 0.90, 0.91, 0.95, 0.99, 0.90)}
# push-rate's minimal all-reduce + RMSNorm kernel, us over our all-reduce, per hidden.
NORM_BOUND = {2048: 0.3, 4096: 0.5, 8192: 1.5}
here = os.path.dirname(os.path.abspath(__file__))


def fi_us(b):  # a FlashInfer-like latency: 6 us + bytes at 150 GB/s
    return 6.0 + b / 150e3


def rows():
    for h in HIDDEN:
        for i, t in enumerate(TOKENS):
            yield h, t, i, t * h * 2


with open(os.path.join(here, "torch-allreduce-grid-2.csv"), "w") as f:
    f.write("# 2 ranks, SYNTHETIC test data (tests/data/report-sample-grid/generate.py)\n")
    f.write("tokens,hidden,bytes,ours_us,nccl_us,symm_us,flashinfer_us,ours_eager_us,nccl_eager_us,"
            "flashinfer_eager_us,ours_over_flashinfer,max_relerr,ours_ctypes_eager_us\n")
    for h, t, i, b in rows():
        fi = 0.0 if (h, t) == (8192, 2048) else round(fi_us(b), 2)
        ours = round(fi_us(b) * AR[h][i], 2)
        f.write("%d,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,%.2e,%.2f\n" % (
            t, h, b, ours, ours * 3, ours * 1.5, fi, ours + 4, ours * 3 + 5, fi + 5 if fi else 0.0,
            ours / fi if fi else 0.0, 1e-3, ours + 3))
with open(os.path.join(here, "torch-arnorm-grid-2.csv"), "w") as f:
    f.write("# 2 ranks, SYNTHETIC test data (tests/data/report-sample-grid/generate.py)\n")
    f.write("tokens,hidden,bytes,ours_us,ours_ar_torch_us,nccl_torch_us,nccl_ar_us,symm_torch_us,flashinfer_us,"
            "max_relerr,ours_over_flashinfer,ours_allreduce_us\n")
    for h, t, i, b in rows():
        fi = 0.0 if (h, t) == (8192, 2048) else round(fi_us(b) + 1.5, 2)
        ours = round((fi_us(b) + 1.5) * NORM[h][i], 2)
        ar = round(fi_us(b) * AR[h][i], 2)
        f.write("%d,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2e,%.3f,%.2f\n" % (
            t, h, b, ours, ar + 6, ar * 3 + 6, ar * 3, ar * 1.5 + 6, fi, 4e-3, ours / fi if fi else 0.0, ar))
with open(os.path.join(here, "allreduce-grid-2.csv"), "w") as f:
    f.write("op,size,count,type,algo,time_us,algbw,busbw,nccl_time_us,nccl_busbw,speedup,maxerr,check,"
            "eager_us,b2b_us,host_us,nccl_eager_us,nccl_b2b_us,nopdl_us,tokens,hidden\n")
    for h, t, i, b in rows():
        ours = round(fi_us(b) * AR[h][i], 2)
        nccl = round(ours * (2.5 - i * 0.3), 2)
        f.write("allreduce,%d,%d,bf16,auto,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,0,OK,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%d,%d\n" % (
            b, b // 2, ours, b / (ours * 1e3), b / (ours * 1e3), nccl, b / (nccl * 1e3), nccl / ours, ours + 4,
            ours + 1, 2.0, nccl + 5, nccl + 1, ours + 0.8, t, h))
with open(os.path.join(here, "arnorm-grid-2.csv"), "w") as f:
    f.write("op,tokens,hidden,bytes,type,fused_us,fused_nopdl_us,unfused_us,allreduce_us,nccl_us,over_ar_us,speedup,"
            "eager_us,maxerr,check,forced_us\n")
    for h, t, i, b in rows():
        ar = round(fi_us(b) * AR[h][i], 2)
        over = (0.4, 0.6, 0.9, 1.3, 1.7, 2.5)[i] + (0.3 if h == 8192 else 0.0)
        fused = round(ar + over, 2)
        f.write("arnorm,%d,%d,%d,bf16,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,%.2f,0.0078,OK,%.2f\n" % (
            t, h, b, fused, fused + 0.7, fused + 3, ar, ar * 2.5, fused - ar, (fused + 3) / fused, fused + 5, fused))
with open(os.path.join(here, "push-rate.csv"), "w") as f:
    f.write("# push-rate: SYNTHETIC test data (tests/data/report-sample-grid/generate.py)\n")
    f.write("mode,map,bytes,ctas,threads,unroll,us,GBps\n")
    for h, t, i, b in rows():
        if not (8 << 10) <= b <= (4 << 20):
            continue
        # Only lamport-* rows of the cumem map count: the slower minimal kernel, the bound,
        # and a faster malloc-mapped row and bare stores that the report must pass over.
        for mode, mapping, factor in (("lamport-sweep", "cumem", 1.2), ("lamport-cta-pdl", "cumem", BOUND[h][i]),
                                      ("lamport-cta-pdl", "malloc", 0.5), ("store", "cumem", 0.4)):
            us = round(fi_us(b) * factor, 2)
            f.write("%s,%s,%d,128,512,1,%.2f,%.1f\n" % (mode, mapping, b, us, b / us / 1e3))
    # push-rate's minimal fused kernel (norm-minimal, ctas = rows) at the cells of 1-128 rows:
    # our all-reduce + NORM_BOUND us; and rows the report must pass over (other modes, malloc).
    for h, t, i, b in rows():
        if t > 128:
            continue
        us = round(fi_us(b) * AR[h][i] + NORM_BOUND[h], 2)
        for mode, mapping, extra in (("norm-minimal", "cumem", 0.0), ("norm-minimal", "malloc", -1.0),
                                     ("norm-row", "cumem", -0.5)):
            f.write("%s,%s,%d,%d,%d,1,%.2f,%.1f\n" % (mode, mapping, b, t, min(1024, h // 8), us + extra,
                                                       b / (us + extra) / 1e3))
