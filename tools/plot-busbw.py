#!/usr/bin/env python3
"""Plot busbw against size for libfusedcomm and NCCL from fc-bench --csv files.

Usage: tools/plot-busbw.py OUT.png TITLE FILE.csv [FILE.csv ...]
Each CSV is one fc-bench run (rank 0's rows; '[rank 0] ' prefixes are stripped).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    lines = [l.split("] ", 1)[-1] for l in open(path) if "," in l and not l.lstrip().startswith("#")]
    return list(csv.DictReader(lines))


def main():
    out, title, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
    fig, ax = plt.subplots(figsize=(8, 5))
    for path in paths:
        data = [r for r in rows(path) if r.get("op")]
        if not data:
            continue
        op = data[0]["op"]
        size = [int(r["size"]) for r in data]
        ax.plot(size, [float(r["busbw"]) for r in data], marker="o", label=f"libfusedcomm {op}")
        if any(float(r["nccl_busbw"]) > 0 for r in data):
            ax.plot(size, [float(r["nccl_busbw"]) for r in data], marker="x", linestyle="--",
                    label=f"NCCL {op}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
