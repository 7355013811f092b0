"""torch.ops.fusedcomm.*: libfusedcomm's operations as PyTorch custom operators.

Importing this module registers them (torch >= 2.4). Each takes a communicator's
`id` (Communicator.id) and returns a new tensor; inputs must be CUDA tensors of
bfloat16 or float16 (float32 for the collectives too) on the communicator's device,
made contiguous if they are not. They run on the current CUDA stream, so they
capture into CUDA graphs (outputs come from the graph's memory pool), and each has a
fake (meta) implementation, so torch.compile(fullgraph=True) traces them.

    all_reduce(x, comm)                    sum over ranks, x's shape
    reduce_scatter(x, comm)                [x.shape[0] / W, ...]: this rank's rows of the sum
    all_gather(x, comm)                    [W * x.shape[0], ...], rank order
    all_gather_matmul(a, weight, comm)     allgather(a) @ weight.T: a [M/W, K], weight [N, K]
    matmul_reduce_scatter(a, weight, comm) rows [rank*M/W, (rank+1)*M/W) of sum_r a_r @ weight_r.T:
                                           a [M, K], weight [N, K] -> [M/W, N]

    all_reduce_residual_rmsnorm(x, residual, weight, eps, comm)
                                           (normed, residual_out): residual_out = allreduce(x) + residual,
                                           normed = RMSNorm(residual_out) * weight; x, residual
                                           [tokens, hidden], weight [hidden]
    all_reduce_residual_rmsnorm_fp8(x, residual, weight, scale, eps, comm)
                                           (q, residual_out): q = float8_e4m3fn(normed / scale),
                                           saturated; scale a one-element float32 CUDA tensor

    matmul_all_reduce(a, weight, comm)     sum_r a_r @ weight_r.T on every rank (a row-parallel
                                           linear: o_proj, down_proj): a [M, K], weight [N, K] -> [M, N]
    matmul_all_reduce_out(a, weight, comm, out)
                                           the same into out ([M, N], a's dtype, contiguous), returned:
                                           where out is a symmetric_tensor (every rank's at the same
                                           place of the same buffer) the large-M path's peers store
                                           into it directly (no copy after the GEMM)
    matmul_all_reduce_residual_rmsnorm(a, weight, residual, norm_weight, eps, comm)
                                           (normed, residual_out) of all_reduce_residual_rmsnorm with
                                           x = a @ weight.T per rank: residual [M, N], norm_weight [N]
    matmul_all_reduce_residual_rmsnorm_fp8(a, weight, residual, norm_weight, scale, eps, comm)
                                           (q, residual_out), q as all_reduce_residual_rmsnorm_fp8's

weight is an nn.Linear weight ([out_features, in_features]), or RMSNorm's gamma.
Errors raise FcError.
"""
import torch

from ._core import OP_T, communicator, dtype_of

# Registered with torch.library.Library (define + impl for CUDA + register_fake), not
# the torch.library.custom_op decorator: the decorator's per-call checks cost several
# microseconds on every eager call (CPU, torch 2.15: 10.2 us per call against 5.5 for
# define + impl around the same body of 2.0 us; TensorRT-LLM measured 11.7 against 6.3
# on torch 2.10, and moved its ops for it), and eager decode calls are where that shows.
# On 2 H200s (torch 2.11, 2026-11-23) an eager all_reduce of 8-128 KiB then took
# 12.5-23 us per call (docs/perf-log.md), against ~60 us through custom_op.
_LIB = torch.library.Library("fusedcomm", "DEF")


class _Op:
    """torch.ops.fusedcomm.<name>: its schema defined, `kernel` its CUDA implementation;
    register_fake adds the fake (meta) one that torch.compile traces with. Calling it
    calls the registered operator."""

    def __init__(self, schema, kernel):
        self.name = schema.split("(", 1)[0]
        _LIB.define(schema)
        _LIB.impl(self.name, kernel, "CUDA")
        self.op = getattr(torch.ops.fusedcomm, self.name)

    def register_fake(self, fake):
        torch.library.register_fake("fusedcomm::" + self.name, fake, lib=_LIB)
        return fake

    def __call__(self, *args):
        return self.op(*args)


def _op(schema):
    return lambda kernel: _Op(schema, kernel)


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(t):
    """The current CUDA stream of t's device, as a handle: torch's raw getter where it
    exists (what torch.compile's generated code calls; no Stream object per call)."""
    if _raw_stream is not None:
        return _raw_stream(t.get_device())
    return torch.cuda.current_stream(t.device).cuda_stream


def _rows_per_rank(x, world, what):
    if x.dim() < 1 or x.shape[0] % world:
        raise ValueError("%s: dim 0 (%s) must be a multiple of the world size %d" % (what, tuple(x.shape), world))
    return x.shape[0] // world


@_op("all_reduce(Tensor x, int comm) -> Tensor")
def all_reduce(x: torch.Tensor, comm: int) -> torch.Tensor:
    c, x = communicator(comm), x.contiguous()
    out = torch.empty_like(x)
    c.all_reduce(x.data_ptr(), out.data_ptr(), x.numel(), dtype_of(x), _stream(x))
    return out


@all_reduce.register_fake
def _(x, comm):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@_op("reduce_scatter(Tensor x, int comm) -> Tensor")
def reduce_scatter(x: torch.Tensor, comm: int) -> torch.Tensor:
    c, x = communicator(comm), x.contiguous()
    rows = _rows_per_rank(x, c.count(), "reduce_scatter")
    out = x.new_empty((rows,) + tuple(x.shape[1:]))
    c.reduce_scatter(x.data_ptr(), out.data_ptr(), out.numel(), dtype_of(x), _stream(x))
    return out


@reduce_scatter.register_fake
def _(x, comm):
    rows = _rows_per_rank(x, communicator(comm).count(), "reduce_scatter")
    return x.new_empty((rows,) + tuple(x.shape[1:]))


@_op("all_gather(Tensor x, int comm) -> Tensor")
def all_gather(x: torch.Tensor, comm: int) -> torch.Tensor:
    c, x = communicator(comm), x.contiguous()
    out = x.new_empty((c.count() * x.shape[0],) + tuple(x.shape[1:]))
    c.all_gather(x.data_ptr(), out.data_ptr(), x.numel(), dtype_of(x), _stream(x))
    return out


@all_gather.register_fake
def _(x, comm):
    return x.new_empty((communicator(comm).count() * x.shape[0],) + tuple(x.shape[1:]))


def _check_linear(a, weight, what):
    if a.dim() != 2 or weight.dim() != 2 or a.shape[1] != weight.shape[1]:
        raise ValueError("%s: a [rows, K] and weight [N, K] expected, got %s and %s"
                         % (what, tuple(a.shape), tuple(weight.shape)))


@_op("all_gather_matmul(Tensor a, Tensor weight, int comm) -> Tensor")
def all_gather_matmul(a: torch.Tensor, weight: torch.Tensor, comm: int) -> torch.Tensor:
    _check_linear(a, weight, "all_gather_matmul")
    c, a, weight = communicator(comm), a.contiguous(), weight.contiguous()
    m, (n, k) = c.count() * a.shape[0], weight.shape
    out = a.new_empty((m, n))
    c.all_gather_matmul(a.data_ptr(), weight.data_ptr(), out.data_ptr(), m, n, k, dtype_of(a), OP_T,
                        stream=_stream(a))
    return out


@all_gather_matmul.register_fake
def _(a, weight, comm):
    _check_linear(a, weight, "all_gather_matmul")
    return a.new_empty((communicator(comm).count() * a.shape[0], weight.shape[0]))


def _matmul_collective(a, weight, comm, what, rows):
    """matmul_reduce_scatter's and matmul_all_reduce's body: a [M, K] and weight [N, K]
    (OP_T) into a new [rows(c, a), N]; the Communicator method named `what` does it."""
    _check_linear(a, weight, what)
    c, a, weight = communicator(comm), a.contiguous(), weight.contiguous()
    (m, k), n = a.shape, weight.shape[0]
    out = a.new_empty((rows(c, a), n))
    getattr(c, what)(a.data_ptr(), weight.data_ptr(), out.data_ptr(), m, n, k, dtype_of(a), OP_T, stream=_stream(a))
    return out


@_op("matmul_reduce_scatter(Tensor a, Tensor weight, int comm) -> Tensor")
def matmul_reduce_scatter(a: torch.Tensor, weight: torch.Tensor, comm: int) -> torch.Tensor:
    return _matmul_collective(a, weight, comm, "matmul_reduce_scatter",
                              lambda c, a: _rows_per_rank(a, c.count(), "matmul_reduce_scatter"))


@matmul_reduce_scatter.register_fake
def _(a, weight, comm):
    _check_linear(a, weight, "matmul_reduce_scatter")
    return a.new_empty((_rows_per_rank(a, communicator(comm).count(), "matmul_reduce_scatter"), weight.shape[0]))


def _check_norm(x, residual, weight):
    if x.dim() != 2 or residual.shape != x.shape or weight.shape != (x.shape[1],):
        raise ValueError("all_reduce_residual_rmsnorm: x and residual [tokens, hidden], weight [hidden] expected, "
                         "got %s, %s, %s" % (tuple(x.shape), tuple(residual.shape), tuple(weight.shape)))


def _check_matmul_norm(a, weight, residual, norm_weight, what):
    """The matmul forms' operands: a [M, K], weight [N, K], residual [M, N], norm_weight
    [N], all of a's dtype (the C op reads them all as one type)."""
    _check_linear(a, weight, what)
    m, n = a.shape[0], weight.shape[0]
    if residual.shape != (m, n) or norm_weight.shape != (n,):
        raise ValueError("%s: residual [%d, %d] and norm_weight [%d] expected, got %s and %s"
                         % (what, m, n, n, tuple(residual.shape), tuple(norm_weight.shape)))
    for t in (weight, residual, norm_weight):
        if t.dtype != a.dtype:
            raise ValueError("%s: every tensor must be of a's dtype %s, got %s" % (what, a.dtype, t.dtype))


@_op("all_reduce_residual_rmsnorm(Tensor x, Tensor residual, Tensor weight, float eps, int comm) -> (Tensor, Tensor)")
def all_reduce_residual_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                                comm: int) -> tuple[torch.Tensor, torch.Tensor]:
    _check_norm(x, residual, weight)
    c = communicator(comm)
    x, residual, weight = x.contiguous(), residual.contiguous(), weight.contiguous()
    normed, residual_out = torch.empty_like(x), torch.empty_like(x)
    c.all_reduce_residual_rmsnorm(x.data_ptr(), residual.data_ptr(), weight.data_ptr(), residual_out.data_ptr(),
                                  normed.data_ptr(), x.shape[0], x.shape[1], eps, dtype_of(x), _stream(x))
    return normed, residual_out


@all_reduce_residual_rmsnorm.register_fake
def _(x, residual, weight, eps, comm):
    _check_norm(x, residual, weight)
    return torch.empty_like(x, memory_format=torch.contiguous_format), torch.empty_like(
        x, memory_format=torch.contiguous_format)


def _check_scale(scale, what="all_reduce_residual_rmsnorm_fp8"):
    if scale.numel() != 1 or scale.dtype != torch.float32 or not scale.is_cuda:
        raise ValueError("%s: scale must be a one-element float32 CUDA tensor, got %s %s"
                         % (what, tuple(scale.shape), scale.dtype))


@_op("all_reduce_residual_rmsnorm_fp8(Tensor x, Tensor residual, Tensor weight, Tensor scale, float eps, "
     "int comm) -> (Tensor, Tensor)")
def all_reduce_residual_rmsnorm_fp8(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                                    scale: torch.Tensor, eps: float, comm: int) -> tuple[torch.Tensor, torch.Tensor]:
    _check_norm(x, residual, weight)
    _check_scale(scale)
    c = communicator(comm)
    x, residual, weight, scale = x.contiguous(), residual.contiguous(), weight.contiguous(), scale.contiguous()
    q, residual_out = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device), torch.empty_like(x)
    c.all_reduce_residual_rmsnorm_fp8(x.data_ptr(), residual.data_ptr(), weight.data_ptr(), residual_out.data_ptr(),
                                      q.data_ptr(), scale.data_ptr(), x.shape[0], x.shape[1], eps, dtype_of(x),
                                      _stream(x))
    return q, residual_out


@all_reduce_residual_rmsnorm_fp8.register_fake
def _(x, residual, weight, scale, eps, comm):
    _check_norm(x, residual, weight)
    _check_scale(scale)  # as the kernel and the matmul form's fake: refused when traced
    return (torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device),
            torch.empty_like(x, memory_format=torch.contiguous_format))


@_op("matmul_all_reduce(Tensor a, Tensor weight, int comm) -> Tensor")
def matmul_all_reduce(a: torch.Tensor, weight: torch.Tensor, comm: int) -> torch.Tensor:
    return _matmul_collective(a, weight, comm, "matmul_all_reduce", lambda c, a: a.shape[0])


@matmul_all_reduce.register_fake
def _(a, weight, comm):
    _check_linear(a, weight, "matmul_all_reduce")
    return a.new_empty((a.shape[0], weight.shape[0]))


def _check_out(a, weight, out, what):
    _check_linear(a, weight, what)
    shape = (a.shape[0], weight.shape[0])
    if tuple(out.shape) != shape or out.dtype != a.dtype or not out.is_contiguous():
        raise ValueError("%s: out must be a contiguous %s tensor of %s, got %s %s%s"
                         % (what, a.dtype, shape, out.dtype, tuple(out.shape),
                            "" if out.is_contiguous() else " (not contiguous)"))


@_op("matmul_all_reduce_out(Tensor a, Tensor weight, int comm, Tensor(a!) out) -> Tensor(a!)")
def matmul_all_reduce_out(a: torch.Tensor, weight: torch.Tensor, comm: int, out: torch.Tensor) -> torch.Tensor:
    _check_out(a, weight, out, "matmul_all_reduce_out")
    c, a, weight = communicator(comm), a.contiguous(), weight.contiguous()
    (m, k), n = a.shape, weight.shape[0]
    c.matmul_all_reduce(a.data_ptr(), weight.data_ptr(), out.data_ptr(), m, n, k, dtype_of(a), OP_T,
                        stream=_stream(a))
    return out


@matmul_all_reduce_out.register_fake
def _(a, weight, comm, out):
    _check_out(a, weight, out, "matmul_all_reduce_out")
    return out


@_op("matmul_all_reduce_residual_rmsnorm(Tensor a, Tensor weight, Tensor residual, Tensor norm_weight, float eps, "
     "int comm) -> (Tensor, Tensor)")
def matmul_all_reduce_residual_rmsnorm(a: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor,
                                       norm_weight: torch.Tensor, eps: float,
                                       comm: int) -> tuple[torch.Tensor, torch.Tensor]:
    _check_matmul_norm(a, weight, residual, norm_weight, "matmul_all_reduce_residual_rmsnorm")
    c = communicator(comm)
    a, weight, residual, norm_weight = a.contiguous(), weight.contiguous(), residual.contiguous(), \
        norm_weight.contiguous()
    normed, residual_out = torch.empty_like(residual), torch.empty_like(residual)
    (m, k), n = a.shape, weight.shape[0]
    c.matmul_all_reduce_residual_rmsnorm(a.data_ptr(), weight.data_ptr(), residual.data_ptr(), norm_weight.data_ptr(),
                                         residual_out.data_ptr(), normed.data_ptr(), m, n, k, eps, dtype_of(a), OP_T,
                                         stream=_stream(a))
    return normed, residual_out


@matmul_all_reduce_residual_rmsnorm.register_fake
def _(a, weight, residual, norm_weight, eps, comm):
    _check_matmul_norm(a, weight, residual, norm_weight, "matmul_all_reduce_residual_rmsnorm")
    shape = (a.shape[0], weight.shape[0])
    return a.new_empty(shape), a.new_empty(shape)


@_op("matmul_all_reduce_residual_rmsnorm_fp8(Tensor a, Tensor weight, Tensor residual, Tensor norm_weight, "
     "Tensor scale, float eps, int comm) -> (Tensor, Tensor)")
def matmul_all_reduce_residual_rmsnorm_fp8(a: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor,
                                           norm_weight: torch.Tensor, scale: torch.Tensor, eps: float,
                                           comm: int) -> tuple[torch.Tensor, torch.Tensor]:
    what = "matmul_all_reduce_residual_rmsnorm_fp8"
    _check_matmul_norm(a, weight, residual, norm_weight, what)
    _check_scale(scale, what)
    c = communicator(comm)
    a, weight, residual, norm_weight, scale = (t.contiguous() for t in (a, weight, residual, norm_weight, scale))
    q = torch.empty(residual.shape, dtype=torch.float8_e4m3fn, device=a.device)
    residual_out = torch.empty_like(residual)
    (m, k), n = a.shape, weight.shape[0]
    c.matmul_all_reduce_residual_rmsnorm_fp8(a.data_ptr(), weight.data_ptr(), residual.data_ptr(),
                                             norm_weight.data_ptr(), residual_out.data_ptr(), q.data_ptr(),
                                             scale.data_ptr(), m, n, k, eps, dtype_of(a), OP_T, stream=_stream(a))
    return q, residual_out


@matmul_all_reduce_residual_rmsnorm_fp8.register_fake
def _(a, weight, residual, norm_weight, scale, eps, comm):
    what = "matmul_all_reduce_residual_rmsnorm_fp8"
    _check_matmul_norm(a, weight, residual, norm_weight, what)
    _check_scale(scale, what)
    shape = (a.shape[0], weight.shape[0])
    return torch.empty(shape, dtype=torch.float8_e4m3fn, device=a.device), a.new_empty(shape)
