#!/usr/bin/env python3
"""All-gather + GEMM from PyTorch, side by side in one run, graph-replayed:

  gemm        cuBLAS GEMM alone on the gathered A (the fused op's ideal)
  nccl+gemm   torch.distributed all_gather_into_tensor (NCCL), then the GEMM
  torch       torch.ops.symm_mem.fused_all_gather_matmul, A in torch's symmetric memory
  ours        fcAllGatherMatmul (ctypes), A a plain tensor, with the default choice
  ours-sym    the same with A from fcMemAlloc (zero-copy)
  engine      the same on a communicator made with FC_AGMM_ALGO=engine

    FC_LIBRARY=build/src/libfusedcomm.so PYTHONPATH=python \\
      build/tools/fcrun/fcrun -n 2 -- python3 tools/bench-torch-agmm.py [--csv FILE]

Shapes: M in {512, 2048, 8192} rows after the gather, (N, K) of the tensor-parallel
layers of Llama-3-8B (3072, 4096), (14336, 4096) and Qwen2.5-32B (3584, 5120),
(27648, 5120) at 2 ranks; at W ranks N is scaled by 2/W. B is an nn.Linear weight
[N, K]. Time per call: a CUDA graph of 5 calls, median of 15 replays, max over ranks;
the columns' graphs are replayed in turn within each round.
Every result is checked against the GEMM alone (max relative error printed).
"""
import os
import sys

os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402

# The source tree's package last: an installed one (the wheel, which bundles the library) on
# PYTHONPATH comes first.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fusedcomm  # noqa: E402
from fusedcomm.bench import Table, init_process_group, ints, parse_args, time_graphs  # noqa: E402

CALLS, REPLAYS = 5, 15


def main():
    args = parse_args(m="512,2048,8192")
    rank, world = init_process_group("bench-agmm")
    group = dist.group.WORLD
    symm_mem.enable_symm_mem_for_group(group.group_name)
    comm = fusedcomm.Communicator.from_process_group()
    os.environ["FC_AGMM_ALGO"] = "engine"  # read at init
    engine = fusedcomm.Communicator.from_process_group()
    del os.environ["FC_AGMM_ALGO"]
    bf16 = fusedcomm.BFLOAT16
    header = "M,N,K,gemm_us,nccl_gemm_us,torch_us,ours_us,ours_sym_us,engine_us,ours_over_gemm,torch_over_gemm,max_relerr"
    table = Table(header, rank, world,
                  "graph of %d calls, median of %d interleaved replays, max over ranks" % (CALLS, REPLAYS))
    for m in ints(args.m):
        for n2, k in ((3072, 4096), (14336, 4096), (3584, 5120), (27648, 5120)):
            n = n2 * 2 // world
            ms = m // world
            g = torch.Generator(device="cuda").manual_seed(m * 7 + n + rank)
            a = torch.randn(ms, k, device="cuda", dtype=torch.bfloat16, generator=g)
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16,
                            generator=torch.Generator(device="cuda").manual_seed(n + k))
            a_full = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
            c_ref = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            c = torch.empty_like(c_ref)
            a_symm = symm_mem.empty(ms, k, device="cuda", dtype=torch.bfloat16)
            a_symm.copy_(a)
            symm_mem.rendezvous(a_symm, group.group_name)
            a_fc = fusedcomm.symmetric_tensor(comm, ms * k, torch.bfloat16).view(ms, k)
            a_fc.copy_(a)
            s = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731

            def gemm():
                torch.matmul(a_full, w.t(), out=c_ref)

            def nccl_gemm():
                dist.all_gather_into_tensor(a_full, a)
                torch.matmul(a_full, w.t(), out=c_ref)

            def torch_fused():
                torch.ops.symm_mem.fused_all_gather_matmul(a_symm, [w.t()], gather_dim=0, group_name=group.group_name)

            def ours(on=comm, src=a):
                on.all_gather_matmul(src.data_ptr(), w.data_ptr(), c.data_ptr(), m, n, k, bf16, fusedcomm.OP_T,
                                     None, s())

            nccl_gemm()  # the reference: NCCL all-gather + cuBLAS
            torch.cuda.synchronize()
            ref = c_ref.float()
            scale = ref.abs().max().item()
            errs = []  # NaN (an unwritten, poisoned element) must not vanish in max()
            for src, on in ((a, comm), (a_fc, comm), (a, engine)):
                c.fill_(float("nan"))
                ours(on, src)
                torch.cuda.synchronize()
                errs.append((c.float() - ref).abs().max().item() / scale)
            _, (c_torch,) = torch.ops.symm_mem.fused_all_gather_matmul(a_symm, [w.t()], gather_dim=0,
                                                                        group_name=group.group_name)
            errs.append((c_torch.float() - ref).abs().max().item() / scale)
            err = float("nan") if any(e != e for e in errs) else max(errs)
            t = time_graphs([gemm, nccl_gemm, torch_fused, ours, lambda: ours(comm, a_fc), lambda: ours(engine, a)],
                            CALLS, REPLAYS)
            row = "%d,%d,%d,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.3f,%.3f,%.3g" % (m, n, k, *t, t[3] / t[0], t[2] / t[0], err)
            table.add(row)
            comm.mem_free(a_fc.data_ptr())
    table.write(args.csv)
    engine.destroy()
    comm.destroy()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
