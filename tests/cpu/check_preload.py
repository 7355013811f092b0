"""Every libfusedcomm kernel is loaded when a communicator is made (src/core/preload.h):
CUDA's lazy loading otherwise blocks a kernel's first launch until the context is idle,
which an op whose earlier kernel waits for a peer can turn into a timeout (found on 2
H200s, docs/design.md, "Loading our kernels with the communicator").

Loading goes by translation unit: each unit that defines a kernel must name one with
FC_PRELOAD_MODULE_OF (the GEMM engine's units register through EngineGemmKernel, and
no header may define a kernel, which would land in units nobody anchors). Textual, like
check_allocations.py, so a new kernel file without an anchor fails it.

    python3 tests/cpu/check_preload.py SRC_DIR
"""
import pathlib
import re
import sys

KERNEL = re.compile(r"\b__global__\b")
ANCHOR = re.compile(r"^FC_PRELOAD_MODULE_OF\(", re.M)


def main(src):
    root = pathlib.Path(src)
    problems = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".cu", ".cuh", ".h", ".cc"):
            continue
        text = path.read_text()
        rel = path.relative_to(root)
        code = re.sub(r"//[^\n]*", "", text)  # comments may mention __global__
        if path.suffix != ".cu":
            if KERNEL.search(code):
                problems.append("%s: defines a kernel outside a .cu file" % rel)
            continue
        if KERNEL.search(code) and not ANCHOR.search(text):
            problems.append("%s: defines a kernel but names none with FC_PRELOAD_MODULE_OF" % rel)
    engine = root / "gemm/engine/allgather_gemm.cuh"
    if engine.exists() and "registerKernelModule" not in engine.read_text():
        problems.append("gemm/engine/allgather_gemm.cuh: EngineGemmKernel no longer registers its kernel")
    anchored = sum(1 for p in root.rglob("*.cu") if ANCHOR.search(p.read_text()))
    for p in problems:
        print(p)
    print("%d units anchored; %s" % (anchored, "FAIL" if problems or anchored == 0 else "ok"))
    return 1 if problems or anchored == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
