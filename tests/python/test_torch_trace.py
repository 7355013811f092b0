"""torch.ops.fusedcomm.* traced whole, on the CPU, without running them: each op inside a
small module that feeds its output on (as a model does), exported with torch.export
(strict: dynamo traces it, so a graph break is an error; the ops' fake kernels give
the shapes; the mutating matmul_all_reduce_out is functionalized), with the token
dimension dynamic for the ops a decode step calls at any batch. Checks that every op
stays one node of the graph and that the outputs' shapes and dtypes are the ops'
contract. The ops' real kernels run on GPUs (tests/python/test_torch_ops.py,
torch.compile and CUDA graphs there). Exit 77 (skip) without torch."""
import os
import sys
import warnings

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
try:
    import torch
except ImportError:
    print("SKIP: torch is not installed for %s" % sys.executable)
    sys.exit(77)
if not hasattr(torch, "export"):
    print("SKIP: this torch has no torch.export")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import fusedcomm  # noqa: E402
import fusedcomm.ops  # noqa: E402,F401
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

W = 4  # the fake communicator's world size
COMM = -7  # its id


class FakeComm:
    def count(self):
        return W


failures = []


def expect(ok, what):
    print("%-72s %s" % (what, "OK" if ok else "FAIL"))
    if not ok:
        failures.append(what)


class Call(torch.nn.Module):
    """fn(*inputs), then every output * 1 (the op's result used downstream)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *inputs):
        out = self.fn(*inputs)
        outs = out if isinstance(out, tuple) else (out,)
        return tuple(o.float() * 1 for o in outs)


def export(name, fn, inputs, dynamic_rows=False, want=()):
    """fn exported whole; `want`: the op's outputs' (shape, dtype), the shapes at `inputs`."""
    dims = None
    if dynamic_rows:  # the first dimension of every input with as many rows as the first
        rows = torch.export.Dim("tokens", min=2, max=8192)
        dims = (tuple({0: rows} if t.dim() == 2 and t.shape[0] == inputs[0].shape[0] else None for t in inputs),)
    try:
        ep = torch.export.export(Call(fn), inputs, dynamic_shapes=dims, strict=True)
    except Exception as e:  # noqa: BLE001 - any failure to trace is the finding
        expect(False, "%s: exported whole (%s: %s)" % (name, type(e).__name__, str(e).splitlines()[0][:200]))
        return
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    ours = [t for t in targets if "fusedcomm" in t]
    expect(len(ours) == 1, "%s: one node of ours in the graph%s (%s)" % (
        name, ", dynamic rows" if dynamic_rows else "", ", ".join(ours) or "none"))
    # The op's own outputs, from the node's fake values.
    node = next(n for n in ep.graph.nodes if n.op == "call_function" and "fusedcomm" in str(n.target))
    val = node.meta.get("val")
    vals = list(val) if isinstance(val, (tuple, list)) else [val]
    if "auto_functionalized" in str(node.target):  # the mutating op: (its return, the new out)
        vals = vals[1:]
    got = tuple((tuple(int(s) if not isinstance(s, torch.SymInt) else str(s) for s in v.shape), v.dtype)
                for v in vals if isinstance(v, torch.Tensor))
    expect(not want or got == want, "%s: outputs %s" % (name, got))
    if dynamic_rows:  # not specialised to the example's rows: every output's rows symbolic
        expect(all(isinstance(shape[0], str) for shape, _ in got), "%s: rows stay symbolic" % name)


def main():
    fusedcomm._core._LIVE[COMM] = FakeComm()
    bf, M, N, K = torch.bfloat16, 8, 32, 16
    # CUDA tensors as the ops take them, fake (no GPU here): export traces with them as they are.
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(M, K, dtype=bf, device="cuda")
        w = torch.empty(N, K, dtype=bf, device="cuda")
        res, gamma = torch.empty(M, N, dtype=bf, device="cuda"), torch.empty(N, dtype=bf, device="cuda")
        scale = torch.ones(1, dtype=torch.float32, device="cuda")
        out = torch.empty(M, N, dtype=bf, device="cuda")
        xn = torch.empty(M, N, dtype=bf, device="cuda")
    ops = torch.ops.fusedcomm
    f8 = torch.float8_e4m3fn

    export("all_reduce", lambda a: ops.all_reduce(a, COMM), (x,), want=(((M, K), bf),))
    export("reduce_scatter", lambda a: ops.reduce_scatter(a, COMM), (x,), want=(((M // W, K), bf),))
    export("all_gather", lambda a: ops.all_gather(a, COMM), (x,), want=(((M * W, K), bf),))
    export("all_gather_matmul", lambda a, b: ops.all_gather_matmul(a, b, COMM), (x, w), want=(((M * W, N), bf),))
    export("matmul_reduce_scatter", lambda a, b: ops.matmul_reduce_scatter(a, b, COMM), (x, w),
           want=(((M // W, N), bf),))
    export("all_reduce_residual_rmsnorm", lambda a, r, g: ops.all_reduce_residual_rmsnorm(a, r, g, 1e-6, COMM),
           (xn, res, gamma), want=(((M, N), bf), ((M, N), bf)))
    export("all_reduce_residual_rmsnorm_fp8",
           lambda a, r, g, s: ops.all_reduce_residual_rmsnorm_fp8(a, r, g, s, 1e-6, COMM), (xn, res, gamma, scale),
           want=(((M, N), f8), ((M, N), bf)))
    export("matmul_all_reduce", lambda a, b: ops.matmul_all_reduce(a, b, COMM), (x, w), want=(((M, N), bf),))
    export("matmul_all_reduce_out", lambda a, b, o: ops.matmul_all_reduce_out(a, b, COMM, o), (x, w, out),
           want=(((M, N), bf),))
    export("matmul_all_reduce_residual_rmsnorm",
           lambda a, b, r, g: ops.matmul_all_reduce_residual_rmsnorm(a, b, r, g, 1e-6, COMM), (x, w, res, gamma),
           want=(((M, N), bf), ((M, N), bf)))
    export("matmul_all_reduce_residual_rmsnorm_fp8",
           lambda a, b, r, g, s: ops.matmul_all_reduce_residual_rmsnorm_fp8(a, b, r, g, s, 1e-6, COMM),
           (x, w, res, gamma, scale), want=(((M, N), f8), ((M, N), bf)))
    # A decode step's batch is any count: the ops it calls, with the token dimension dynamic.
    export("all_reduce", lambda a: ops.all_reduce(a, COMM), (x,), dynamic_rows=True)
    export("all_reduce_residual_rmsnorm", lambda a, r, g: ops.all_reduce_residual_rmsnorm(a, r, g, 1e-6, COMM),
           (xn, res, gamma), dynamic_rows=True)
    export("matmul_all_reduce", lambda a, b: ops.matmul_all_reduce(a, b, COMM), (x, w), dynamic_rows=True)
    export("matmul_all_reduce_residual_rmsnorm",
           lambda a, b, r, g: ops.matmul_all_reduce_residual_rmsnorm(a, b, r, g, 1e-6, COMM), (x, w, res, gamma),
           dynamic_rows=True)
    del fusedcomm._core._LIVE[COMM]
    if failures:
        print("%d failed" % len(failures))
        sys.exit(1)
    print("every op traced whole")


if __name__ == "__main__":
    main()
