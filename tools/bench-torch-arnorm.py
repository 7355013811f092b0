#!/usr/bin/env python3
"""All-reduce + residual add + RMSNorm from PyTorch, side by side in one run, graph-replayed:

  ours        torch.ops.fusedcomm.all_reduce_residual_rmsnorm (fcAllReduceResidualRMSNorm)
  ours_ar     torch.ops.fusedcomm.all_reduce, then the residual add and RMSNorm in torch
  nccl        torch.distributed.all_reduce (NCCL), then the residual add and RMSNorm in torch
  nccl_ar     the NCCL all-reduce alone
  symm        torch symmetric memory's one_shot_all_reduce, then the add and RMSNorm in torch
  flashinfer  FlashInfer's trtllm_allreduce_fusion, pattern kARResidualRMSNorm (TensorRT-LLM's
              fused kernel, what vLLM and SGLang call), when importable (0 and a note otherwise)
  ours_allreduce  torch.ops.fusedcomm.all_reduce alone (no norm): what the fused op's residual
              and norm cost on top of our all-reduce (issue 44's target: at most 1 us at 1-128 tokens)

The last columns: ours_over_flashinfer = ours / flashinfer (0 where FlashInfer did not run),
ours_allreduce_us.

    PYTHONPATH=<installed package> build/tools/fcrun/fcrun -n 2 -- python3 tools/bench-torch-arnorm.py [--csv FILE]
        [--grid short|full] [--tokens LIST] [--hidden LIST]

RMSNorm in torch: torch.nn.functional.rms_norm of the bf16 residual sum (fp32 inside),
as an engine without a fused kernel runs it. Shapes (issue 19): tokens 1-4096 x hidden
4096 and 8192, bf16; --grid: the decode grid of issue 44 (fusedcomm.bench.DECODE_GRIDS,
tools/common/decode_grid.h); --tokens / --hidden replace either list. Time per call: a CUDA graph of 5 calls, median of 15 interleaved
replays, max over ranks (fusedcomm.bench.time_graphs). Our result is checked against
NCCL + torch (max error relative to the largest magnitude).
"""
import os
import sys

os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

# The source tree's package last: an installed one (the wheel, which bundles the library) on
# PYTHONPATH comes first.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fusedcomm  # noqa: E402
import fusedcomm.ops  # noqa: E402,F401
from fusedcomm.bench import (  # noqa: E402
    flashinfer_by_hidden, Table, init_process_group,
    ints, parse_args, relerr, time_graphs)

EPS = 1e-6


def torch_norm(summed, residual, weight):
    r = summed + residual
    return torch.nn.functional.rms_norm(r, (r.shape[-1],), weight, EPS), r


def main():
    args = parse_args(grid=True, tokens="1,2,4,8,16,32,64,128,256,512,1024,2048,4096", hidden="4096,8192")
    rank, world = init_process_group("bench-arnorm")
    comm = fusedcomm.Communicator.from_process_group()
    c = comm.id
    symm = None
    try:
        import torch.distributed._symmetric_memory as symm_mem
        symm = symm_mem
    except ImportError:
        pass
    header = ("tokens,hidden,bytes,ours_us,ours_ar_torch_us,nccl_torch_us,nccl_ar_us,symm_torch_us,flashinfer_us,"
              "max_relerr,ours_over_flashinfer,ours_allreduce_us")
    table = Table(header, rank, world,
                  "bf16, graph of 5 calls, median of 15 interleaved replays, max over ranks")
    group_name = dist.group.WORLD.group_name
    tokens_list = ints(args.tokens)
    for hidden, peer in flashinfer_by_hidden(rank, world, max(tokens_list), ints(args.hidden)):
        for tokens in tokens_list:
            g = torch.Generator(device="cuda").manual_seed(tokens * 31 + hidden + rank)
            x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16, generator=g)
            g0 = torch.Generator(device="cuda").manual_seed(tokens * 31 + hidden)  # the same on every rank
            residual = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16, generator=g0)
            weight = torch.randn(hidden, device="cuda", dtype=torch.bfloat16, generator=g0)
            buf = x.clone()

            def nccl_ar():
                buf.copy_(x)
                dist.all_reduce(buf)
                return buf

            fns = [lambda: torch.ops.fusedcomm.all_reduce_residual_rmsnorm(x, residual, weight, EPS, c),
                   lambda: torch_norm(torch.ops.fusedcomm.all_reduce(x, c), residual, weight),
                   lambda: torch_norm(nccl_ar(), residual, weight),
                   nccl_ar]
            sym_in = None
            if symm is not None:
                sym_in = symm.empty(tokens, hidden, device="cuda", dtype=torch.bfloat16)
                symm.rendezvous(sym_in, group_name)
                sym_in.copy_(x)
                fns.append(lambda: torch_norm(torch.ops.symm_mem.one_shot_all_reduce(sym_in, "sum", group_name),
                                              residual, weight))
            else:
                fns.append(lambda: None)
            fi_res, fi_norm = torch.empty_like(x), torch.empty_like(x)
            fi_peer = peer  # None for this cell alone where FlashInfer refuses its shape
            want_normed, want_res = fns[2]()
            outs = [fns[0]()]
            if fi_peer is not None:
                try:
                    fi_peer.all_reduce_residual_rmsnorm(x, residual, weight, EPS, fi_res, fi_norm)
                    outs.append((fi_norm, fi_res))
                except Exception as e:  # a shape FlashInfer refuses: the same on every rank
                    if rank == 0:
                        print("# %d x %d: no FlashInfer column: %s" % (tokens, hidden, str(e).split("\n")[0]),
                              flush=True)
                    fi_peer = None
            torch.cuda.synchronize()
            err = max(max(relerr(n, want_normed), relerr(r, want_res)) for n, r in outs)
            # FlashInfer's column (index 5) where it runs, then our all-reduce alone, timed
            # in the same interleaved rounds as the rest.
            if fi_peer is not None:
                fns.append(lambda: fi_peer.all_reduce_residual_rmsnorm(x, residual, weight, EPS, fi_res, fi_norm))
            fns.append(lambda: torch.ops.fusedcomm.all_reduce(x, c))
            us = time_graphs(fns)
            ours_ar = us.pop()
            if fi_peer is None:
                us.append(0.0)
            if symm is None:
                us[4] = 0.0
            row = "%d,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2e,%.3f,%.2f" % (
                tokens, hidden, tokens * hidden * 2, *us, err, us[0] / us[5] if us[5] else 0.0, ours_ar)
            table.add(row)
    table.write(args.csv)
    comm.destroy()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
