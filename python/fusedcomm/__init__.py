"""fusedcomm: libfusedcomm (fused compute + communication for the GPUs of one node)
from Python. The core is ctypes over the C library the wheel bundles (no compiled
extension); FC_LIBRARY points it at another build. PyTorch integration: tensors over
symmetric memory (symmetric_tensor), communicators from a torch.distributed process
group of one node (Communicator.from_process_group) or, in a world that spans nodes,
one per node (Communicator.for_node, node_ranks), and torch.ops.fusedcomm.* custom operators
once `import fusedcomm.ops` has run (they trace under torch.compile and capture
into CUDA graphs).

    import torch, torch.distributed as dist, fusedcomm, fusedcomm.ops
    dist.init_process_group("nccl")
    with fusedcomm.Communicator.from_process_group() as comm:
        y = torch.ops.fusedcomm.all_reduce(x, comm.id)

Errors raise FcError (.code: fcResult_t, .name, .message: fcGetLastError's text).
Shapes, layouts and semantics: include/fusedcomm.h and docs/api.md.
"""
from ._core import (  # noqa: F401
    BFLOAT16, FLOAT16, FLOAT32, NUM_RESULTS, OP_N, OP_T, SUM, VERSION_CODE, Communicator, Config, FcError, Library,
    UniqueId, all_gather_objects, communicator, dtype_of, find_library, library, node_ranks, symmetric_tensor)
from ._core import (  # noqa: F401
    IN_PROGRESS, INTERNAL_ERROR, INVALID_ARGUMENT, INVALID_USAGE, NOT_SUPPORTED, REMOTE_ERROR, SUCCESS, SYSTEM_ERROR,
    TIMEOUT, UNHANDLED_CUDA_ERROR, UNIQUE_ID_BYTES)

# The package's version is the C library's (FC_VERSION_CODE = major*10000 + minor*100 + patch).
__version__ = "%d.%d.%d" % (VERSION_CODE // 10000, VERSION_CODE // 100 % 100, VERSION_CODE % 100)
