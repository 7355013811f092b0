"""A Llama-style tensor-parallel MLP block (Llama-3-8B: hidden 4096, intermediate
14336) in three versions, checked against each other and timed graph-replayed:

  torch.distributed  all_gather_into_tensor (NCCL), gate/up GEMM, SiLU * up, down
                     GEMM, reduce_scatter_tensor (NCCL)
  torch symm_mem     fused_all_gather_matmul and fused_matmul_reduce_scatter
  fusedcomm          torch.ops.fusedcomm.all_gather_matmul and matmul_reduce_scatter

Activations are sharded by rows (sequence parallel): each rank holds [M/W, hidden]
in and out; weights are nn.Linear weights split by the intermediate dimension.

    pip install .        # or PYTHONPATH=python FC_LIBRARY=build/src/libfusedcomm.so
    build/tools/fcrun/fcrun -n 2 -- python3 docs/examples/python/tp_mlp.py [--m 512,2048,8192]

(torchrun works too: the communicator comes from the process group.) Prints, per M,
us per forward pass (a CUDA graph of 5 passes, median of 15 interleaved replays, max
over ranks) and the largest difference from the torch.distributed result.
"""
import argparse
import os
import sys

os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402
import torch.nn.functional as F  # noqa: E402

try:
    import fusedcomm
except ImportError:  # not installed: the source tree's package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
    import fusedcomm
import fusedcomm.ops  # noqa: E402,F401  (registers torch.ops.fusedcomm.*)
from fusedcomm.bench import init_process_group, time_graphs  # noqa: E402

HIDDEN, INTERMEDIATE = 4096, 14336


def mlp_nccl(x, w_gate_up, w_down, x_full, out):
    dist.all_gather_into_tensor(x_full, x)
    gate, up = (x_full @ w_gate_up.t()).chunk(2, dim=1)
    dist.reduce_scatter_tensor(out, (F.silu(gate) * up) @ w_down.t())
    return out


def mlp_symm(x_symm, w_gate_up, w_down, group_name):
    _, (gate_up,) = torch.ops.symm_mem.fused_all_gather_matmul(x_symm, [w_gate_up.t()], gather_dim=0,
                                                                group_name=group_name)
    gate, up = gate_up.chunk(2, dim=1)
    return torch.ops.symm_mem.fused_matmul_reduce_scatter(F.silu(gate) * up, w_down.t(), "sum", scatter_dim=0,
                                                          group_name=group_name)


def mlp_fusedcomm(x, w_gate_up, w_down, comm_id):
    gate, up = torch.ops.fusedcomm.all_gather_matmul(x, w_gate_up, comm_id).chunk(2, dim=1)
    return torch.ops.fusedcomm.matmul_reduce_scatter(F.silu(gate) * up, w_down, comm_id)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="512,2048,8192", help="rows (tokens) of the whole batch")
    args = ap.parse_args()
    rank, world = init_process_group("tp-mlp")
    group_name = dist.group.WORLD.group_name
    inter = INTERMEDIATE // world
    gen = torch.Generator(device="cuda").manual_seed(1234 + rank)
    w_gate_up = torch.randn(2 * inter, HIDDEN, device="cuda", dtype=torch.bfloat16, generator=gen) / HIDDEN ** 0.5
    w_down = torch.randn(HIDDEN, inter, device="cuda", dtype=torch.bfloat16, generator=gen) / inter ** 0.5
    with fusedcomm.Communicator.from_process_group() as comm:
        if rank == 0:
            print("# tensor-parallel MLP, hidden %d, intermediate %d, %d ranks, %s, torch %s; us per forward pass"
                  % (HIDDEN, INTERMEDIATE, world, torch.cuda.get_device_name(), torch.__version__))
            print("M,nccl_us,symm_mem_us,fusedcomm_us,fusedcomm_vs_best_other,max_relerr")
        worst = 0.0
        for m in [int(v) for v in args.m.split(",")]:
            x = torch.randn(m // world, HIDDEN, device="cuda", dtype=torch.bfloat16, generator=gen)
            x_full = torch.empty(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
            out = torch.empty_like(x)
            x_symm = symm_mem.empty(m // world, HIDDEN, device="cuda", dtype=torch.bfloat16)
            x_symm.copy_(x)
            symm_mem.rendezvous(x_symm, group_name)
            ref = mlp_nccl(x, w_gate_up, w_down, x_full, out).float()
            scale = ref.abs().max().item()
            errs = [(y.float() - ref).abs().max().item() / scale
                    for y in (mlp_symm(x_symm, w_gate_up, w_down, group_name),
                              mlp_fusedcomm(x, w_gate_up, w_down, comm.id))]
            t = time_graphs([lambda: mlp_nccl(x, w_gate_up, w_down, x_full, out),
                             lambda: mlp_symm(x_symm, w_gate_up, w_down, group_name),
                             lambda: mlp_fusedcomm(x, w_gate_up, w_down, comm.id)])
            worst = max(worst, *errs)
            if rank == 0:
                print("%d,%.1f,%.1f,%.1f,%.3f,%.2e" % (m, *t, t[2] / min(t[0], t[1]), max(errs)), flush=True)
    dist.destroy_process_group()
    # bf16 activations through two GEMMs: a few bf16 ulps of the output's scale.
    return 0 if worst < 5e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
