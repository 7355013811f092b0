"""Our fused GEMMs behind PyTorch's async tensor parallelism, in one line:

    import fusedcomm.async_tp
    fusedcomm.async_tp.use_for_async_tp(group)    # a process group, or None: the world

registers fcAllGatherMatmul and fcMatmulReduceScatter as the CUDA implementations of
torch.ops.symm_mem.fused_all_gather_matmul and fused_matmul_reduce_scatter, the ops
that torch.compile's micro-pipeline TP (torch._inductor.config._micro_pipeline_tp)
emits for an all-gather feeding a matmul and a matmul feeding a reduce-scatter, and
that vLLM's async-TP pass emits too: compiled code runs ours unchanged. The ops'
semantics are torch's (torch/distributed/_symmetric_memory):

    fused_all_gather_matmul(A_shard, Bs, gather_dim, group_name, *, return_A=True)
        -> (all_gather(A_shard, gather_dim) or None, [A @ B for B in Bs])
    fused_matmul_reduce_scatter(A, B, reduce_op, scatter_dim, group_name)
        -> reduce_scatter(A @ B, reduce_op, scatter_dim)

Ours takes gather_dim / scatter_dim 0 (A's leading dims flattened into rows), bf16 or
fp16, reduce_op "sum", any number of Bs ([K, N]; an nn.Linear weight's transpose is
read in place): the first B through fcAllGatherMatmul, which also writes the gathered
A where it is returned (return_A) or read, the others as matmuls of that gathered A. Every other form (another dim, "avg",
fp32, a group not opted in) runs torch's own implementation, as does every call once
the handle is closed. A may be any CUDA tensor (torch's own needs symmetric memory;
ours stages it). Every rank of the group calls use_for_async_tp together (it makes a
fusedcomm Communicator over the group unless given one).
"""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as _symm  # defines torch.ops.symm_mem.*

from ._core import BFLOAT16, FLOAT16, OP_N, OP_T, Communicator
from .ops import _stream

# torch's CUDA implementations, called for the forms ours does not take.
_TORCH_AG = _symm._fused_all_gather_matmul
_TORCH_RS = _symm._fused_matmul_reduce_scatter
_ACTIVE = {}  # group name -> (Communicator, world size)
_LIB = None  # the registration (kept: a group not enabled runs torch's kernels through it)
_DTYPES = {torch.bfloat16: BFLOAT16, torch.float16: FLOAT16}


def _weight(b):
    """B [K, N] as our op reads it: (tensor, transB). A transposed nn.Linear weight is
    read in place as [N, K] (OP_T)."""
    if b.t().is_contiguous():
        return b.t(), OP_T
    return b.contiguous(), OP_N


def _all_gather_matmul(A_shard, Bs, gather_dim, group_name, **kwargs):
    entry = _ACTIVE.get(group_name)
    bad_b = any(b.dim() != 2 or b.dtype != A_shard.dtype or b.shape[0] != A_shard.shape[-1] for b in Bs)
    if (entry is None or gather_dim not in (0, -A_shard.dim()) or A_shard.dim() < 2 or not Bs
            or A_shard.dtype not in _DTYPES or bad_b):
        return _TORCH_AG(A_shard, Bs, gather_dim, group_name, **kwargs)
    comm, world = entry
    a = A_shard.contiguous().flatten(0, -2)
    m, k = world * a.shape[0], a.shape[1]
    # The gathered A only where someone reads it (return_A, or the matmuls of the other
    # Bs): without it fcAllGatherMatmul keeps the peers' rows in its own buffers, which
    # costs less than writing them out (issue 45: 5-15 % with an Agathered).
    return_a = kwargs.get("return_A", True)
    gathered = a.new_empty((m, k)) if return_a or len(Bs) > 1 else None
    w, trans = _weight(Bs[0])
    n = Bs[0].shape[1]
    out = a.new_empty((m, n))
    comm.all_gather_matmul(a.data_ptr(), w.data_ptr(), out.data_ptr(), m, n, k, _DTYPES[a.dtype], trans,
                           a_gathered=None if gathered is None else gathered.data_ptr(), stream=_stream(a))
    outs = [out] + [torch.matmul(gathered, b) for b in Bs[1:]]
    lead = (world * A_shard.shape[0],) + tuple(A_shard.shape[1:-1])
    outs = [o.view(lead + (o.shape[-1],)) for o in outs]
    return (gathered.view(lead + (k,)) if return_a else None), outs


def _matmul_reduce_scatter(A, B, reduce_op, scatter_dim, group_name, **kwargs):
    entry = _ACTIVE.get(group_name)
    world = entry[1] if entry else 1
    if (entry is None or reduce_op != "sum" or scatter_dim not in (0, -A.dim()) or A.dim() < 2 or A.dtype not in _DTYPES
            or B.dim() != 2 or B.dtype != A.dtype or B.shape[0] != A.shape[-1] or A.shape[0] % world or kwargs):
        return _TORCH_RS(A, B, reduce_op, scatter_dim, group_name, **kwargs)
    comm = entry[0]
    a = A.contiguous().flatten(0, -2)
    (m, k), n = a.shape, B.shape[1]
    w, trans = _weight(B)
    out = a.new_empty((m // world, n))
    comm.matmul_reduce_scatter(a.data_ptr(), w.data_ptr(), out.data_ptr(), m, n, k, _DTYPES[a.dtype], trans,
                               stream=_stream(a))
    return out.view((A.shape[0] // world,) + tuple(A.shape[1:-1]) + (n,))


def _impl(lib, name, fn):
    """Register fn as the CUDA kernel of symm_mem::name over torch's. torch 2.11 registers
    its own from Python too, and its Library.impl refuses a second Python kernel for the
    same key unless told it may override (allow_override, default True from 2.12 on)."""
    try:
        lib.impl(name, fn, "CUDA", allow_override=True)
    except TypeError:  # a torch whose impl has no allow_override
        torch.library._impls.discard("symm_mem/%s/CUDA" % name)
        lib.impl(name, fn, "CUDA")


def _sync_registration():
    """Ours stay registered once made (a group that is not enabled falls back to torch's
    implementation inside them): unregistering and registering again, as enable() /
    disable() would, is refused by torch's Python-kernel bookkeeping."""
    global _LIB
    if _ACTIVE and _LIB is None:
        lib = torch.library.Library("symm_mem", "IMPL")
        _impl(lib, "fused_all_gather_matmul", _all_gather_matmul)
        _impl(lib, "fused_matmul_reduce_scatter", _matmul_reduce_scatter)
        _LIB = lib


class AsyncTP:
    """The opt-in of one group: enable() / disable() (torch's kernels again while no
    group is enabled; the communicator stays), close() (disable, and destroy the
    communicator if use_for_async_tp made it). A with-block closes it."""

    def __init__(self, group, comm, owned):
        self.group_name = group.group_name
        self.comm, self.owned, self.world = comm, owned, dist.get_world_size(group)
        self.enable()

    def enable(self):
        _ACTIVE[self.group_name] = (self.comm, self.world)
        _sync_registration()
        return self

    def disable(self):
        _ACTIVE.pop(self.group_name, None)
        _sync_registration()

    def close(self):
        self.disable()
        if self.owned and self.comm is not None:
            self.comm.destroy()
        self.comm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def use_for_async_tp(group=None, comm=None):
    """Run torch.ops.symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter of
    `group` (default: the world) on libfusedcomm. comm: a Communicator over the same
    ranks in the same order (default: one made from the group, collectively). torch's
    recipe still applies around it: torch._inductor.config._micro_pipeline_tp = True and
    torch.distributed._symmetric_memory.enable_symm_mem_for_group(group_name), or the
    compiler does not emit these ops. Returns an AsyncTP handle."""
    group = group or dist.group.WORLD
    owned = comm is None
    if owned:
        comm = Communicator.from_process_group(group if group is not dist.group.WORLD else None)
    return AsyncTP(group, comm, owned)
