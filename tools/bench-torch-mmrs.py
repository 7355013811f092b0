#!/usr/bin/env python3
"""GEMM + reduce-scatter from PyTorch, side by side in one run, graph-replayed:

  gemm        cuBLAS GEMM alone (this rank's partial product, [M, N])
  nccl        that GEMM, then torch.distributed reduce_scatter_tensor (NCCL)
  torch       torch.ops.symm_mem.fused_matmul_reduce_scatter
  ours        fcMatmulReduceScatter (ctypes), partials in the input type (default)
  ours-fp32   the same with fp32 partials (config.fp32Partials = 1)
  engine      the same on a communicator made with FC_MMRS_ALGO=engine (the
              persistent GEMM engine where it applies, else the op's fallback)

    FC_LIBRARY=build/src/libfusedcomm.so PYTHONPATH=python \\
      build/tools/fcrun/fcrun -n 2 -- python3 tools/bench-torch-mmrs.py [--csv FILE]

Shapes (issue 17): M in {512, 2048, 8192} rows, (N, K) of the tensor-parallel output
layers of Llama-3-8B (4096, 7168), (4096, 2048) and Qwen2.5-32B (5120, 13824),
(5120, 2560) at 2 ranks; at W ranks K is scaled by 2/W. B is an nn.Linear weight
[N, K]. Time per call: a CUDA graph of 5 calls, median of 15 interleaved replays, max
over ranks (fusedcomm.bench.time_graphs). Every result is checked against NCCL +
cuBLAS (max error relative to the output's largest magnitude).
"""
import os
import sys

os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed._symmetric_memory  # noqa: E402,F401  (registers torch.ops.symm_mem.*)

# The source tree's package last: an installed one (the wheel, which bundles the library) on
# PYTHONPATH comes first.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fusedcomm  # noqa: E402
from fusedcomm.bench import Table, init_process_group, ints, parse_args, time_graphs  # noqa: E402

CALLS, REPLAYS = 5, 15


def main():
    args = parse_args(m="512,2048,8192")
    rank, world = init_process_group("bench-mmrs")
    group_name = dist.group.WORLD.group_name
    comm = fusedcomm.Communicator.from_process_group()
    comm32 = fusedcomm.Communicator.from_process_group(config=fusedcomm.Config(fp32Partials=1))
    os.environ["FC_MMRS_ALGO"] = "engine"  # read at init
    engine = fusedcomm.Communicator.from_process_group()
    del os.environ["FC_MMRS_ALGO"]
    bf16 = fusedcomm.BFLOAT16
    header = ("M,N,K,gemm_us,nccl_us,torch_us,ours_us,ours_fp32_us,engine_us,ours_over_gemm,torch_over_gemm,"
              "max_relerr")
    table = Table(header, rank, world,
                  "graph of %d calls, median of %d interleaved replays, max over ranks" % (CALLS, REPLAYS))
    for m in ints(args.m):
        for n, k2 in ((4096, 7168), (4096, 2048), (5120, 13824), (5120, 2560)):
            k = k2 * 2 // world
            g = torch.Generator(device="cuda").manual_seed(m * 7 + k + rank)
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
            p = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            ref_out = torch.empty(m // world, n, device="cuda", dtype=torch.bfloat16)
            c = torch.empty_like(ref_out)
            s = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731

            def gemm():
                torch.matmul(a, w.t(), out=p)

            def nccl():
                torch.matmul(a, w.t(), out=p)
                dist.reduce_scatter_tensor(ref_out, p)

            def torch_fused():
                return torch.ops.symm_mem.fused_matmul_reduce_scatter(a, w.t(), "sum", scatter_dim=0,
                                                                      group_name=group_name)

            def ours(on=comm):
                on.matmul_reduce_scatter(a.data_ptr(), w.data_ptr(), c.data_ptr(), m, n, k, bf16, fusedcomm.OP_T, s())

            nccl()  # the reference
            torch.cuda.synchronize()
            ref = ref_out.float()
            scale = ref.abs().max().item()
            errs = []
            for on in (comm, comm32, engine):
                c.fill_(float("nan"))
                ours(on)
                torch.cuda.synchronize()
                errs.append((c.float() - ref).abs().max().item() / scale)
            errs.append((torch_fused().float() - ref).abs().max().item() / scale)
            err = float("nan") if any(e != e for e in errs) else max(errs)
            t = time_graphs([gemm, nccl, torch_fused, ours, lambda: ours(comm32), lambda: ours(engine)], CALLS,
                            REPLAYS)
            row = "%d,%d,%d,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.3f,%.3f,%.3g" % (m, n, k, *t, t[3] / t[0], t[2] / t[0],
                                                                               err)
            table.add(row)
    table.write(args.csv)
    engine.destroy()
    comm32.destroy()
    comm.destroy()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
