#!/usr/bin/env python3
"""Writes this folder's made-up caller-form CSVs (issue 45) for tests/cpu/test_report.py:
the formats of tools/bench-torch-agmm.py / bench-torch-mmrs.py --msweep and fc-bench
agmm / mmrs --msweep, with times built from round numbers so that every ratio the
report prints can be checked by hand. Not measurements."""
import os

here = os.path.dirname(os.path.abspath(__file__))
SWEEP_M = (512, 1024, 2048, 4096, 8192, 16384, 32768)
# ours / GEMM alone per form: (at M = 512, elsewhere).
AGMM_FORMS = {("plain", 0): (1.20, 1.10), ("plain", 1): (1.22, 1.12), ("symmetric", 0): (1.30, 1.05),
              ("symmetric", 1): (1.24, 1.08)}
MMRS_FORMS = {"plain": (1.20, 1.10), "symmetric": (1.15, 1.04)}


def gemm_us(m, n, k):
    """A made-up GEMM time: 10 us steps (so that ratios with two decimals stay exact)."""
    return 10.0 * max(1, round(2.0 * m * n * k / 6e8 / 10))


def shapes(layers, sweep_layers):
    out = {}
    for m in (512, 2048, 8192):
        for n, k in layers:
            out[(m, n, k)] = [1, 0]
    for n, k in sweep_layers:
        for m in SWEEP_M:
            out.setdefault((m, n, k), [0, 0])[1] = 1
    return sorted(out.items(), key=lambda e: ([(n, k) for n, k in layers].index(e[0][1:]), e[0][0]))


def write(name, header, rows):
    with open(os.path.join(here, name), "w") as f:
        f.write("# made-up rows for the report's test (generate.py), not measurements\n")
        f.write(header + "\n" + "\n".join(rows) + "\n")


def torch_rows(layers, forms, agmm):
    rows = []
    for (m, n, k), (pub, swp) in shapes(layers, layers[:2]):
        g = gemm_us(m, n, k)
        comm, nccl = 0.5 * g, 1.5 * g
        # torch symm_mem 1.20x the GEMM, but 1.06x at the sweep's largest M on the first layer
        # (where the 1.10x forms lose to it).
        tor = g * (1.06 if (m, n) == (32768, layers[0][0]) else 1.20)
        for form, (r512, r) in forms.items():
            ours = g * (r512 if m == 512 else r)
            a, gathered = form if agmm else (form, None)
            cells = [m, n, k, a] + ([gathered] if agmm else []) + [pub, swp]
            cells += ["%.1f" % x for x in (g, comm)] + ["symmetric-ce"] + ["%.1f" % x for x in (nccl, tor, ours)]
            cells += ["%.3f" % x for x in (ours / g, tor / g, nccl / g, ours / tor, ours / nccl)]
            cells += ["%.1f" % (ours - max(g, comm)), "0.00391", 5, 15]
            rows.append(",".join(str(c) for c in cells))
    return rows


def fc_rows(layers, forms, agmm):
    rows = []
    for (m, n, k), _ in shapes([layers[0]], [layers[0]]):
        if m not in SWEEP_M:
            continue
        g = gemm_us(m, n, k)
        comm, nccl = 0.5 * g, 1.5 * g
        for form, (r512, r) in forms.items():
            ours = g * (r512 if m == 512 else r)
            a, gathered = form if agmm else (form, None)
            cells = [m, n, k, "bfloat16", "T", a] + ([gathered] if agmm else [])
            cells += ["%.1f" % x for x in (g, comm)] + ["symmetric-auto"] + ["%.1f" % x for x in (nccl, g + comm, ours)]
            cells += ["%.3f" % x for x in (ours / g, ours / nccl)] + ["%.1f" % (ours - max(g, comm)), 0, "OK", 5, 10]
            rows.append(",".join(str(c) for c in cells))
    return rows


TORCH = ("{a},in_public,in_sweep,gemm_us,comm_us,comm_from,nccl_us,torch_us,ours_us,ours_over_gemm,torch_over_gemm,"
         "nccl_over_gemm,ours_over_torch,ours_over_nccl,fixed_us,max_relerr,calls,replays")
FC = ("M,N,K,type,transB,{a},gemm_us,comm_us,comm_from,nccl_gemm_us,fc_gemm_us,op_us,op_over_gemm,"
      "op_over_nccl_gemm,fixed_us,relerr,check,calls,replays")
AGMM_LAYERS = ((3072, 4096), (14336, 4096), (3584, 5120), (27648, 5120))
MMRS_LAYERS = ((4096, 2048), (4096, 7168), (5120, 13824), (5120, 2560))
write("torch-agmm-sp-2.csv", "M,N,K," + TORCH.format(a="a,agathered"), torch_rows(AGMM_LAYERS, AGMM_FORMS, True))
write("torch-mmrs-sp-2.csv", "M,N,K," + TORCH.format(a="a"), torch_rows(MMRS_LAYERS, MMRS_FORMS, False))
write("agmm-sp-2.csv", FC.format(a="a,agathered"), fc_rows(AGMM_LAYERS, AGMM_FORMS, True))
write("mmrs-sp-2.csv", FC.format(a="a"), fc_rows(MMRS_LAYERS, MMRS_FORMS, False))
