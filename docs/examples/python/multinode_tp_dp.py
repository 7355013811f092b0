"""Tensor parallelism inside each node through libfusedcomm, data parallelism across
nodes through NCCL (torch.distributed), in one program: how Megatron-LM, vLLM, SGLang
and torchtitan lay out a job that outgrows a node. A libfusedcomm communicator covers
the GPUs of one node (one over ranks of several hosts is refused on every rank);
everything between nodes goes through torch.distributed.

    world: N nodes x T GPUs, rank = node * T + local rank (torchrun's numbering)
    tensor-parallel group: the T ranks of a node   -> Communicator.for_node, fusedcomm ops
    data-parallel group: one rank per node, the same local rank on each -> new_group, NCCL

Each rank holds one tensor-parallel shard of an MLP block (sequence parallel, as in
tp_mlp.py: activations split by rows, weights by the intermediate dimension). Each node
runs a batch of its own through the block (torch.ops.fusedcomm.all_gather_matmul and
matmul_reduce_scatter), takes the gradient of its down-projection shard for the loss
|y|^2 / 2 (dy = y, all-gathered inside the node as sequence parallelism's backward
does), and the data-parallel all-reduce averages that gradient over the nodes: one
step of data-parallel training of a tensor-parallel layer. Every rank checks its
shard of the averaged gradient against the whole step computed in float32.

On real nodes, one torchrun per node (NCCL):
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        docs/examples/python/multinode_tp_dp.py
On one machine, with the nodes faked by FC_HOST_ID (FC_FAKE_HOSTS=2: 4 ranks as 2
hosts of 2, rank r on host r // 2):
    FC_FAKE_HOSTS=2 build/tools/fcrun/fcrun -n 4 -- python3 docs/examples/python/multinode_tp_dp.py
    # fewer GPUs than ranks: add FC_SHARE_GPU=1 FC_TORCH_BACKEND=gloo (NCCL refuses
    # two ranks on one GPU; gloo all-reduces CUDA tensors too)
(pip install . first, or PYTHONPATH=python FC_LIBRARY=build/src/libfusedcomm.so.)
Prints one line per rank; exits 1 where a shard is off.
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F

try:
    import fusedcomm
except ImportError:  # not installed: the source tree's package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
    import fusedcomm
import fusedcomm.ops  # noqa: E402,F401  (registers torch.ops.fusedcomm.*)

HIDDEN, INTERMEDIATE, ROWS_PER_RANK = 1024, 2048, 128


def init():
    """The world's process group (torchrun's environment, or tools/fcrun's through a
    file named after its unique id); this rank on its GPU; hosts faked on request."""
    rank = int(os.environ.get("RANK", os.environ.get("FC_RANK", 0)))
    world = int(os.environ.get("WORLD_SIZE", os.environ.get("FC_WORLD_SIZE", 1)))
    local = int(os.environ.get("LOCAL_RANK", os.environ.get("FC_LOCAL_RANK", rank)))
    fake = int(os.environ.get("FC_FAKE_HOSTS", 0))
    if fake:  # before any fusedcomm call: the library and for_node read it
        os.environ["FC_HOST_ID"] = "fake-node-%d" % (rank // (world // fake))
    torch.cuda.set_device(local % torch.cuda.device_count())
    backend = os.environ.get("FC_TORCH_BACKEND", "nccl")
    if "MASTER_ADDR" in os.environ:
        dist.init_process_group(backend)
    else:
        path = os.path.join(tempfile.gettempdir(), "fc-multinode-" + os.environ["FC_UNIQUE_ID"][:16])
        dist.init_process_group(backend, init_method="file://" + path, rank=rank, world_size=world)
    return rank, world


def weights(seed):
    """The whole layer (every rank makes the same): up [I, H], down [H, I] (nn.Linear)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(INTERMEDIATE, HIDDEN, generator=g) / HIDDEN ** 0.5,
            torch.randn(HIDDEN, INTERMEDIATE, generator=g) / INTERMEDIATE ** 0.5)


def batch(node, rows):
    """Node `node`'s batch [rows, H]: the data-parallel replicas see different data."""
    return torch.randn(rows, HIDDEN, generator=torch.Generator().manual_seed(1000 + node))


def main():
    rank, world = init()
    # Tensor parallelism inside the node: our communicator over this node's ranks (every
    # rank of the world takes part); comm.nodes lists every node's ranks.
    comm = fusedcomm.Communicator.for_node()
    nodes = comm.nodes
    node = next(i for i, ranks in enumerate(nodes) if rank in ranks)
    tp, local = len(nodes[node]), nodes[node].index(rank)
    if any(len(ranks) != tp for ranks in nodes):
        raise SystemExit("every node must run as many ranks (%s)" % nodes)

    # What not to do: one communicator over the ranks of several nodes is refused, on
    # every rank, before any of them starts to initialise.
    if len(nodes) > 1:
        try:
            fusedcomm.Communicator.from_process_group().destroy()
            raise SystemExit("a communicator over %d nodes was not refused" % len(nodes))
        except fusedcomm.FcError as e:
            assert e.code == fusedcomm.INVALID_USAGE, e
            if rank == 0:
                print("over the whole world: %s" % e.message, flush=True)

    # Data parallelism across the nodes: one torch.distributed group per local rank
    # (every rank makes all of them, in the same order, as torch requires).
    dp_group = None
    for t in range(tp):
        group = dist.new_group([ranks[t] for ranks in nodes])
        if t == local:
            dp_group = group

    # This rank's shards (bf16 on the GPU): up rows and down columns [t*I/T, (t+1)*I/T).
    up, down = weights(7)
    cols = slice(local * INTERMEDIATE // tp, (local + 1) * INTERMEDIATE // tp)
    up_t, down_t = up[cols].to("cuda", torch.bfloat16), down[:, cols].contiguous().to("cuda", torch.bfloat16)
    rows = ROWS_PER_RANK * tp
    x = batch(node, rows)
    x_t = x[local * ROWS_PER_RANK:(local + 1) * ROWS_PER_RANK].to("cuda", torch.bfloat16)

    # Forward inside the node (fusedcomm): all-gather + GEMM, GELU, GEMM + reduce-scatter.
    h_t = F.gelu(torch.ops.fusedcomm.all_gather_matmul(x_t, up_t, comm.id).float())    # [rows, I/T]
    y_t = torch.ops.fusedcomm.matmul_reduce_scatter(h_t.bfloat16(), down_t, comm.id)    # [rows/T, H]
    # Backward of the down projection for |y|^2 / 2: dy = y, gathered inside the node.
    dy = torch.ops.fusedcomm.all_gather(y_t, comm.id).float()                          # [rows, H]
    grad_t = dy.t() @ h_t                                                               # [H, I/T]
    # Across the nodes (torch.distributed): the data-parallel average of the gradient.
    dist.all_reduce(grad_t, group=dp_group)
    grad_t /= len(nodes)

    # The whole step in float32 from the same bf16 inputs, on every node's batch.
    want = torch.zeros(HIDDEN, INTERMEDIATE)
    upr, downr = up.bfloat16().float(), down.bfloat16().float()
    for n in range(len(nodes)):
        h = F.gelu(batch(n, rows).bfloat16().float() @ upr.t())
        want += (h @ downr.t()).t() @ h
    want = want[:, cols] / len(nodes)
    err = ((grad_t.cpu() - want).norm() / want.norm()).item()
    ok = err < 2e-2
    print("rank %d: node %d of %d (ranks %s), tensor-parallel rank %d of %d: gradient shard relative error %.2e %s"
          % (rank, node, len(nodes), nodes[node], local, tp, err, "OK" if ok else "FAIL"), flush=True)
    comm.destroy()
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
