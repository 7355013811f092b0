"""libfusedcomm from Python through ctypes: no compiled extension.

    import fusedcomm
    lib = fusedcomm.Library()              # the bundled library (or $FC_LIBRARY)
    comm = fusedcomm.Communicator.from_env(lib)   # under tools/fcrun
    comm.all_reduce(x.data_ptr(), y.data_ptr(), x.numel(), fusedcomm.dtype_of(x), stream)

Every function returns None or raises FcError, which carries the result code, its
name and fcGetLastError's message. Pointers are plain integers (torch:
tensor.data_ptr()), streams too (torch.cuda.current_stream().cuda_stream). Buffers
must live on the communicator's GPU (CUDA tensors, or symmetric_tensor below): a CPU
tensor's data_ptr() raises FcError with INVALID_ARGUMENT naming the argument. The
signatures mirror include/fusedcomm.h, which documents shapes, layouts and
semantics.
"""
import ctypes
import itertools
import os
import pickle
import socket

# fcResult_t
SUCCESS, UNHANDLED_CUDA_ERROR, SYSTEM_ERROR, INTERNAL_ERROR, INVALID_ARGUMENT = 0, 1, 2, 3, 4
INVALID_USAGE, REMOTE_ERROR, IN_PROGRESS, TIMEOUT, NOT_SUPPORTED = 5, 6, 7, 8, 9
NUM_RESULTS = 10
# fcDataType_t, fcRedOp_t, fcOperation_t
FLOAT16, FLOAT32, BFLOAT16 = 6, 7, 9
SUM = 0
OP_N, OP_T = 0, 1
UNIQUE_ID_BYTES = 128
# FC_VERSION_CODE of the header these declarations follow (fcConfig_t.version)
VERSION_CODE = 300


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]

    @classmethod
    def from_hex(cls, text):
        """The text form fcrun puts in FC_UNIQUE_ID (256 hex characters)."""
        raw = bytes.fromhex(text)
        if len(raw) != UNIQUE_ID_BYTES:
            raise ValueError("a unique id is %d bytes, got %d" % (UNIQUE_ID_BYTES, len(raw)))
        uid = cls()
        ctypes.memmove(ctypes.byref(uid), raw, UNIQUE_ID_BYTES)
        return uid

    def hex(self):
        return ctypes.string_at(ctypes.byref(self), UNIQUE_ID_BYTES).hex()


class FcError(RuntimeError):
    """A libfusedcomm call failed: .code (fcResult_t), .name, .message."""

    def __init__(self, code, name, message, call):
        super().__init__("%s: %s: %s" % (call, name, message))
        self.code, self.name, self.message = code, name, message


_c = ctypes
_P, _SZ, _I, _R = _c.c_void_p, _c.c_size_t, _c.c_int, _c.c_int  # fcResult_t is an int enum
_SIGNATURES = {
    "fcGetErrorString": (_c.c_char_p, [_I]),
    "fcGetLastError": (_c.c_char_p, [_P]),
    "fcGetVersion": (_R, [_c.POINTER(_I)]),
    "fcGetUniqueId": (_R, [_c.POINTER(UniqueId)]),
    "fcCommInitRank": (_R, [_c.POINTER(_P), _I, UniqueId, _I]),
    "fcCommInitRankConfig": (_R, [_c.POINTER(_P), _I, UniqueId, _I, _P]),
    "fcCommInitAll": (_R, [_c.POINTER(_P), _I, _c.POINTER(_I)]),
    "fcCommDestroy": (_R, [_P]),
    "fcCommAbort": (_R, [_P]),
    "fcCommGetAsyncError": (_R, [_P, _c.POINTER(_I)]),
    "fcCommCount": (_R, [_P, _c.POINTER(_I)]),
    "fcCommUserRank": (_R, [_P, _c.POINTER(_I)]),
    "fcCommCuDevice": (_R, [_P, _c.POINTER(_I)]),
    "fcMemAlloc": (_R, [_P, _c.POINTER(_P), _SZ]),
    "fcMemFree": (_R, [_P, _P]),
    "fcBarrier": (_R, [_P, _P]),
    "fcAllReduceOneShot": (_R, [_P, _P, _SZ, _I, _I, _P, _P]),
    "fcAllReduce": (_R, [_P, _P, _SZ, _I, _I, _P, _P]),
    "fcReduceScatter": (_R, [_P, _P, _SZ, _I, _I, _P, _P]),
    "fcAllGather": (_R, [_P, _P, _SZ, _I, _P, _P]),
    "fcAllGatherMatmul": (_R, [_P, _P, _P, _P, _SZ, _SZ, _SZ, _I, _I, _P, _P]),
    "fcMatmulReduceScatter": (_R, [_P, _P, _P, _SZ, _SZ, _SZ, _I, _I, _P, _P]),
    "fcAllReduceResidualRMSNorm": (_R, [_P, _P, _P, _P, _P, _SZ, _SZ, _c.c_float, _I, _P, _P]),
    "fcAllReduceResidualRMSNormFp8": (_R, [_P, _P, _P, _P, _P, _P, _SZ, _SZ, _c.c_float, _I, _P, _P]),
    "fcMatmulAllReduce": (_R, [_P, _P, _P, _SZ, _SZ, _SZ, _I, _I, _P, _P]),
    "fcMatmulAllReduceResidualRMSNorm": (_R, [_P] * 6 + [_SZ, _SZ, _SZ, _c.c_float, _I, _I, _P, _P]),
    "fcMatmulAllReduceResidualRMSNormFp8": (_R, [_P] * 7 + [_SZ, _SZ, _SZ, _c.c_float, _I, _I, _P, _P]),
}


def find_library():
    """Where libfusedcomm is loaded from: $FC_LIBRARY (another build), else the copy
    the wheel bundles next to this file, else the system's (meson install)."""
    if os.environ.get("FC_LIBRARY"):
        return os.environ["FC_LIBRARY"]
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libfusedcomm.so")
    return bundled if os.path.exists(bundled) else "libfusedcomm.so.0"


_LIBRARY = None


def library():
    """The process's Library, loaded on first use."""
    global _LIBRARY
    if _LIBRARY is None:
        _LIBRARY = Library()
    return _LIBRARY


class Library:
    """The loaded library with every C signature declared."""

    def __init__(self, path=None):
        path = path or find_library()
        self.path = path
        self._lib = ctypes.CDLL(path)
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(self._lib, name)
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)

    def error_string(self, code):
        return self.fcGetErrorString(code).decode()

    def check(self, code, call, comm=None):
        if code != SUCCESS:
            raise FcError(code, self.error_string(code), self.fcGetLastError(comm).decode(), call)

    def version(self):
        v = _I()
        self.check(self.fcGetVersion(_c.byref(v)), "fcGetVersion")
        return v.value

    def unique_id(self):
        uid = UniqueId()
        self.check(self.fcGetUniqueId(_c.byref(uid)), "fcGetUniqueId")
        return uid


class Config(ctypes.Structure):
    """fcConfig_t; Config() is FC_CONFIG_INITIALIZER (every option unset)."""

    UNSET = -1
    MAGIC = 0xFC0C0F16
    _fields_ = [("size", _SZ), ("magic", _c.c_uint), ("version", _c.c_uint), ("blocking", _I), ("maxCtas", _I),
                ("channels", _I), ("timeoutMs", _c.c_longlong), ("workspaceBytes", _c.c_longlong),
                ("scratchBytes", _c.c_longlong), ("fp32Partials", _I)]

    def __init__(self, **options):
        super().__init__(ctypes.sizeof(Config), self.MAGIC, VERSION_CODE, *([self.UNSET] * 7))
        for name, value in options.items():
            setattr(self, name, value)


# The end of every refusal of ranks on several hosts: the C library's words (src/bootstrap/host.cc).
ONE_NODE_ADVICE = ("a communicator covers the GPUs of one node: make one per node, of that node's ranks "
                   "(Python: fusedcomm.Communicator.for_node), and communicate across nodes through NCCL or "
                   "torch.distributed (docs/api.md, \"Across nodes\"); hosts are told apart by hostname and "
                   "boot id, or by FC_HOST_ID where it is set")


def this_host():
    """(key, name, boot id) of this host as libfusedcomm tells hosts apart: FC_HOST_ID
    where set and not empty (the whole identity; tests fake several hosts on one
    machine with it), else the hostname and /proc/sys/kernel/random/boot_id."""
    override = os.environ.get("FC_HOST_ID")
    if override:
        return "FC_HOST_ID=" + override, override, ""
    name = socket.gethostname()
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return name + "\n" + boot, name, boot


def _by_host(hosts):
    """Indices of `hosts` (this_host() tuples, one per rank) grouped by host, the hosts
    in order of their lowest index."""
    groups = {}
    for i, h in enumerate(hosts):
        groups.setdefault(h[0], []).append(i)
    return list(groups.values())


def _rank_ranges(ranks):
    """"rank 2", "ranks 0-1", "ranks 0,2-3" (as the C library writes them)."""
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts.append(str(ranks[i]) if j == i else "%d-%d" % (ranks[i], ranks[j]))
        i = j + 1
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(parts)


def spanning_hosts_message(hosts):
    """None when `hosts` (this_host() of each rank, in rank order) are one host, else
    the library's refusal: the hosts with their ranks, and what to do."""
    groups = _by_host(hosts)
    if len(groups) <= 1:
        return None
    names = [hosts[g[0]][1] for g in groups]
    listed = []
    for k, g in enumerate(groups[:4]):
        _, name, boot = hosts[g[0]]
        label = "'%s'" % name
        if names.count(name) > 1 and boot:
            label += " (boot id %s)" % boot[:8]
        listed.append("%s on %s" % (_rank_ranges(g), label))
    more = ", and %d more hosts" % (len(groups) - 4) if len(groups) > 4 else ""
    return "the ranks are on %d hosts (%s%s): %s" % (len(groups), ", ".join(listed), more, ONE_NODE_ADVICE)


def all_gather_objects(obj, group=None):
    """Every rank's `obj` (small and picklable), in the group's rank order: what
    torch.distributed.all_gather_object returns, without NumPy. torch's object
    collectives turn their bytes back through tensor.numpy(), and torch does not depend
    on NumPy, so on an installation without it they raise "Numpy is not available"; here
    the bytes cross as a uint8 tensor (lengths first, then the padded bytes) and come
    back through tolist(). The tensors live where the group's backend takes them: the
    current CUDA device for NCCL alone, the CPU for anything with gloo (as torch's own
    object collectives choose). Collective: every rank of the group calls it."""
    import torch
    import torch.distributed as dist

    backend = str(dist.get_backend(group))  # "nccl", "gloo", "cpu:gloo,cuda:nccl", ...
    nccl_only = "nccl" in backend and "gloo" not in backend
    device = torch.device("cuda", torch.cuda.current_device()) if nccl_only else torch.device("cpu")
    data = pickle.dumps(obj)
    world = dist.get_world_size(group)
    size = torch.tensor([len(data)], dtype=torch.int64, device=device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size, group=group)
    sizes = [int(s.item()) for s in sizes]
    mine = torch.zeros(max(sizes), dtype=torch.uint8, device=device)
    if data:
        mine[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)
    everyone = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(everyone, mine, group=group)
    return [pickle.loads(bytes(t[:n].tolist())) for t, n in zip(everyone, sizes)]


def node_ranks(group=None):
    """The global ranks of a torch.distributed group (default: the world) node by node:
    one sorted list per host, the hosts in order of their lowest rank. Collective: every
    rank of the group calls it."""
    import torch.distributed as dist

    hosts = all_gather_objects(this_host(), group)
    world = group is None or group is dist.group.WORLD
    return [[r if world else dist.get_global_rank(group, r) for r in g] for g in _by_host(hosts)]


_IDS = itertools.count(1)
_LIVE = {}  # Communicator.id -> Communicator


def communicator(comm_id):
    """The live Communicator with this id (torch.ops.fusedcomm.* take ids)."""
    try:
        return _LIVE[comm_id]
    except KeyError:
        raise ValueError("no live fusedcomm communicator has id %d (destroyed?)" % comm_id) from None


class Communicator:
    """One rank's communicator: collective creation, methods for every operation,
    destroy() (or a with-block) at the end. lib: a Library, or None for library()."""

    def __init__(self, lib, nranks, uid, rank, config=None):
        self.lib = lib or library()
        self.handle = _P()
        cfg = _c.byref(config) if config is not None else None
        self.lib.check(self.lib.fcCommInitRankConfig(_c.byref(self.handle), nranks, uid, rank, cfg),
                       "fcCommInitRankConfig")
        # A small integer naming this communicator in torch.ops.fusedcomm.* (operators
        # take ints, not Python objects); valid until destroy().
        self.id = next(_IDS)
        _LIVE[self.id] = self

    @classmethod
    def from_env(cls, lib=None, config=None):
        """Rank, world size and unique id from tools/fcrun's environment."""
        return cls(lib, int(os.environ["FC_WORLD_SIZE"]), UniqueId.from_hex(os.environ["FC_UNIQUE_ID"]),
                   int(os.environ["FC_RANK"]), config)

    @classmethod
    def from_process_group(cls, group=None, lib=None, config=None):
        """The ranks of a torch.distributed process group (default: the world), which
        must all run on one node: its first rank makes the unique id, and one
        all_gather_objects through the group hands it out with every rank's host. A
        group that spans hosts raises FcError (INVALID_USAGE) on every rank with the
        library's message, before any rank starts the init (which could not reach
        the ranks of another host): use for_node there. Every rank of the group calls
        this; each uses its current CUDA device."""
        import torch.distributed as dist

        lib = lib or library()
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        everyone = all_gather_objects((this_host(), lib.unique_id().hex() if rank == 0 else None), group)
        refusal = spanning_hosts_message([h for h, _ in everyone])
        if refusal is not None:
            raise FcError(INVALID_USAGE, lib.error_string(INVALID_USAGE), refusal, "Communicator.from_process_group")
        return cls(lib, world, UniqueId.from_hex(everyone[0][1]), rank, config)

    @classmethod
    def for_node(cls, group=None, lib=None, config=None):
        """This rank's communicator over the ranks of its node, in a torch.distributed
        world that may span nodes (tensor parallelism inside the node through our
        ops; data or pipeline parallelism across nodes through NCCL). Collective over
        `group` (default: the world): its ranks are split by host (node_ranks), a
        process group is made per node, as torch.distributed.new_subgroups makes them,
        and each node's ranks build one communicator. With the world, every rank calls
        new_group for every node in the same order (torch's rule); with another group,
        each node's ranks alone make theirs (new_group's use_local_synchronization,
        torch >= 2.1). The result carries .node_group (the node's process group) and
        .nodes (node_ranks: every node's global ranks)."""
        import torch.distributed as dist

        nodes = node_ranks(group)
        me = dist.get_rank()
        node_group = None
        for ranks in nodes:
            if group is None or group is dist.group.WORLD:
                made = dist.new_group(ranks)  # every rank, every node, in order
            elif me in ranks:
                made = dist.new_group(ranks, use_local_synchronization=True)
            else:
                continue
            if me in ranks:
                node_group = made
        comm = cls.from_process_group(node_group, lib, config)
        comm.node_group, comm.nodes = node_group, nodes
        return comm

    def _check(self, code, call):
        self.lib.check(code, call, self.handle)

    def rank(self):
        v = _I()
        self._check(self.lib.fcCommUserRank(self.handle, _c.byref(v)), "fcCommUserRank")
        return v.value

    def count(self):
        v = _I()
        self._check(self.lib.fcCommCount(self.handle, _c.byref(v)), "fcCommCount")
        return v.value

    def async_error(self):
        """fcCommGetAsyncError: (code, message); message is "" on success."""
        v = _I()
        self._check(self.lib.fcCommGetAsyncError(self.handle, _c.byref(v)), "fcCommGetAsyncError")
        return v.value, (self.lib.fcGetLastError(self.handle).decode() if v.value != SUCCESS else "")

    def mem_alloc(self, nbytes):
        """fcMemAlloc (collective): the device address of this rank's symmetric buffer."""
        p = _P()
        self._check(self.lib.fcMemAlloc(self.handle, _c.byref(p), nbytes), "fcMemAlloc")
        return p.value

    def mem_free(self, ptr):
        self._check(self.lib.fcMemFree(self.handle, ptr), "fcMemFree")

    def all_reduce(self, send, recv, count, dtype, stream=0):
        self._check(self.lib.fcAllReduce(send, recv, count, dtype, SUM, self.handle, stream), "fcAllReduce")

    def all_reduce_one_shot(self, send, recv, count, dtype, stream=0):
        self._check(self.lib.fcAllReduceOneShot(send, recv, count, dtype, SUM, self.handle, stream),
                    "fcAllReduceOneShot")

    def reduce_scatter(self, send, recv, recvcount, dtype, stream=0):
        self._check(self.lib.fcReduceScatter(send, recv, recvcount, dtype, SUM, self.handle, stream),
                    "fcReduceScatter")

    def all_gather(self, send, recv, sendcount, dtype, stream=0):
        self._check(self.lib.fcAllGather(send, recv, sendcount, dtype, self.handle, stream), "fcAllGather")

    def all_gather_matmul(self, a, b, c, m, n, k, dtype, trans_b=OP_N, a_gathered=None, stream=0):
        self._check(self.lib.fcAllGatherMatmul(a, b, c, a_gathered, m, n, k, trans_b, dtype, self.handle, stream),
                    "fcAllGatherMatmul")

    def matmul_reduce_scatter(self, a, b, c, m, n, k, dtype, trans_b=OP_N, stream=0):
        self._check(self.lib.fcMatmulReduceScatter(a, b, c, m, n, k, trans_b, dtype, self.handle, stream),
                    "fcMatmulReduceScatter")

    def all_reduce_residual_rmsnorm(self, send, residual, weight, residual_out, norm_out, tokens, hidden, eps,
                                    dtype, stream=0):
        self._check(self.lib.fcAllReduceResidualRMSNorm(send, residual, weight, residual_out, norm_out, tokens,
                                                        hidden, eps, dtype, self.handle, stream),
                    "fcAllReduceResidualRMSNorm")

    def all_reduce_residual_rmsnorm_fp8(self, send, residual, weight, residual_out, norm_out_fp8, scale, tokens,
                                        hidden, eps, dtype, stream=0):
        self._check(self.lib.fcAllReduceResidualRMSNormFp8(send, residual, weight, residual_out, norm_out_fp8, scale,
                                                           tokens, hidden, eps, dtype, self.handle, stream),
                    "fcAllReduceResidualRMSNormFp8")

    def matmul_all_reduce(self, a, b, c, m, n, k, dtype, trans_b=OP_N, stream=0):
        self._check(self.lib.fcMatmulAllReduce(a, b, c, m, n, k, trans_b, dtype, self.handle, stream),
                    "fcMatmulAllReduce")

    def matmul_all_reduce_residual_rmsnorm(self, a, b, residual, weight, residual_out, norm_out, m, n, k, eps, dtype,
                                           trans_b=OP_N, stream=0):
        self._check(self.lib.fcMatmulAllReduceResidualRMSNorm(a, b, residual, weight, residual_out, norm_out, m, n, k,
                                                              eps, trans_b, dtype, self.handle, stream),
                    "fcMatmulAllReduceResidualRMSNorm")

    def matmul_all_reduce_residual_rmsnorm_fp8(self, a, b, residual, weight, residual_out, norm_out_fp8, scale, m, n,
                                               k, eps, dtype, trans_b=OP_N, stream=0):
        self._check(self.lib.fcMatmulAllReduceResidualRMSNormFp8(a, b, residual, weight, residual_out, norm_out_fp8,
                                                                 scale, m, n, k, eps, trans_b, dtype, self.handle,
                                                                 stream),
                    "fcMatmulAllReduceResidualRMSNormFp8")

    def barrier(self, stream=0):
        self._check(self.lib.fcBarrier(self.handle, stream), "fcBarrier")

    def destroy(self):
        _LIVE.pop(getattr(self, "id", None), None)
        if self.handle:
            code = self.lib.fcCommDestroy(self.handle)
            self.handle = _P()
            self.lib.check(code, "fcCommDestroy")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()


class _Described:
    def __init__(self, interface):
        self.__cuda_array_interface__ = interface


class _SymmetricBuffer:
    """What a symmetric tensor's storage holds on to: the communicator (kept alive
    while the tensor lives) and the fcMemAlloc address, freed with the tensor
    (fcMemFree is local: ranks may free at different times)."""

    def __init__(self, comm, ptr, interface):
        self.comm, self.ptr, self.__cuda_array_interface__ = comm, ptr, interface

    def __del__(self):
        if self.comm.handle:  # after comm.destroy() the memory is gone already
            try:
                self.comm.mem_free(self.ptr)
            except FcError:
                pass


def symmetric_tensor(comm, numel, dtype, free_with_tensor=False):
    """A 1-D torch tensor of `numel` elements over fcMemAlloc memory (collective: every
    rank calls it with the same size), a zero-copy input for every rank's ops. With
    free_with_tensor the memory is released when the tensor (and every view of it) is
    gone, and the communicator lives at least as long; otherwise free it with
    comm.mem_free(t.data_ptr())."""
    import torch

    size = torch.empty((), dtype=dtype).element_size()
    ptr = comm.mem_alloc(max(1, numel * size))
    # __cuda_array_interface__ has no bfloat16: describe raw 16/32-bit words, then view.
    raw = {2: "<u2", 4: "<u4"}[size]
    interface = {"shape": (numel,), "typestr": raw, "data": (ptr, False), "version": 3}
    holder = _SymmetricBuffer(comm, ptr, interface) if free_with_tensor else _Described(interface)
    words = torch.as_tensor(holder, device="cuda")  # the tensor's storage holds `holder`
    return words.view(dtype)


def dtype_of(tensor):
    """fcDataType_t of a torch tensor (bfloat16, float16, float32)."""
    import torch  # only this helper needs torch

    table = {torch.bfloat16: BFLOAT16, torch.float16: FLOAT16, torch.float32: FLOAT32}
    if tensor.dtype not in table:
        raise TypeError("libfusedcomm takes bfloat16, float16 or float32, not %s" % tensor.dtype)
    return table[tensor.dtype]
