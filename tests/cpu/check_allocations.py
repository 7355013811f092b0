"""No memory allocation on an operation's call path (issue: eager calls 1.5-4x slower
than graph replays when ops called cudaMallocAsync / cudaFreeAsync per call).

Every CUDA allocation or free in src/ must sit in a function of the allowlist below:
the communicator's init and destroy, and the two owners of long-lived device memory
(the fused ops' scratch, which grows only when a larger op than ever comes, outside
capture; the cuBLASLt workspace, made at init). The check is textual: it finds each
call and the function it is in (the last top-level definition above it), so an
allocation added to an op, a launcher or a kernel wrapper fails it.

    python3 tests/cpu/check_allocations.py SRC_DIR
"""
import pathlib
import re
import sys

CALLS = re.compile(r"\b(cudaMalloc\w*|cudaFree\w*|cudaHostAlloc|cudaMallocHost|cuMemAlloc\w*|cuMemCreate)\s*\(")
# (file relative to src/, function): why it may allocate.
ALLOWED = {
    ("comm/comm.cc", "checkDevice"): "cudaFree(nullptr) creates the context at init",
    ("comm/comm.cc", "commInit"): "the error record at init",
    ("comm/comm.cc", "commDestroy"): "destroy",
    ("comm/scratch.cc", "Scratch::~Scratch"): "destroy",
    ("comm/scratch.cc", "Scratch::grow"): "the fused ops' scratch: init, or a larger op than ever, outside capture",
    ("gemm/gemm.cc", "Gemm::~Gemm"): "destroy",
    ("gemm/gemm.cc", "Gemm::init"): "the cuBLASLt workspace at init",
    ("memory/symmetric_heap.cc", "SymmetricHeap::create"): "symmetric memory: init and fcMemAlloc",
}
DEFINITION = re.compile(r"^(?:[\w:<>,*&\s]+?\s)?([\w:~]+)\s*\([^;]*$")


def enclosing_function(lines, index):
    for j in range(index, -1, -1):
        line = lines[j]
        if line and not line[0].isspace() and not line.startswith(("//", "#", "}")):
            m = DEFINITION.match(line)
            if m:
                return m.group(1)
    return "?"


def main(src):
    bad = []
    for path in sorted(pathlib.Path(src).rglob("*")):
        if path.suffix not in (".cc", ".cu", ".cuh", ".h"):
            continue
        rel = path.relative_to(src).as_posix()
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            code = line.split("//")[0]
            for call in CALLS.findall(code):
                fn = enclosing_function(lines, i)
                if (rel, fn) not in ALLOWED:
                    bad.append("%s:%d: %s in %s" % (rel, i + 1, call, fn))
    for b in bad:
        print("allocation outside init/destroy/scratch growth:", b)
    print("%d allocation calls outside the allowlist" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
