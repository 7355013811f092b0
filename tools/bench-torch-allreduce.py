#!/usr/bin/env python3
"""The small all-reduce from PyTorch, side by side in one run, graph-replayed and eager:

  ours        torch.ops.fusedcomm.all_reduce (fcAllReduce, the default communicator)
  ours_ctypes eager only: Communicator.all_reduce straight through ctypes into a
              preallocated output, on torch's raw current stream: what the torch op's
              layer costs on top of the C call (issue 23)
  nccl        torch.distributed.all_reduce (NCCL), in place on a copy
  symm        torch symmetric memory's one_shot_all_reduce (its input in symmetric memory)
  flashinfer  FlashInfer's trtllm_allreduce_fusion, pattern kAllReduce (TensorRT-LLM's
              Lamport one-shot / two-shot, PDL on), when importable (../shared/anchors/flashinfer
              prepares it; otherwise its columns are 0 and the header says why)

    PYTHONPATH=<installed package> build/tools/fcrun/fcrun -n 2 -- python3 tools/bench-torch-allreduce.py [--csv FILE]
        [--grid short|full] [--tokens LIST] [--hidden LIST]

Shapes (issue 23): tokens 1-2048 x hidden 4096 and 8192, bf16; --grid: the decode grid of
issue 44 (fusedcomm.bench.DECODE_GRIDS, tools/common/decode_grid.h), hidden x tokens with
counts that are not powers of two; --tokens / --hidden replace either list. Graph: a CUDA graph of 5
calls, median of 15 interleaved replays, max over ranks (fusedcomm.bench.time_graphs);
eager: 20 calls back to back then a synchronize, wall time per call (time_eager). Every
result is checked against NCCL's (max error relative to the largest magnitude).
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
    flashinfer_by_hidden, Table, init_process_group, ints,
    parse_args, relerr, time_eager, time_graphs)


def main():
    args = parse_args(grid=True, tokens="1,2,4,8,16,32,64,128,256,512,1024,2048", hidden="4096,8192")
    rank, world = init_process_group("bench-allreduce")
    group_name = dist.group.WORLD.group_name
    comm = fusedcomm.Communicator.from_process_group()
    c = comm.id
    import torch.distributed._symmetric_memory as symm_mem
    tokens_list = ints(args.tokens)
    header = ("tokens,hidden,bytes,ours_us,nccl_us,symm_us,flashinfer_us,ours_eager_us,nccl_eager_us,"
              "flashinfer_eager_us,ours_over_flashinfer,max_relerr,ours_ctypes_eager_us")
    table = Table(header, rank, world,
                  "bf16; graph: 5 calls, median of 15 interleaved replays; eager: 20 calls + sync; max over ranks")
    for hidden, peer in flashinfer_by_hidden(rank, world, max(tokens_list), ints(args.hidden)):
        for tokens in tokens_list:
            g = torch.Generator(device="cuda").manual_seed(tokens * 31 + hidden + rank)
            x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16, generator=g)
            buf = x.clone()
            sym = symm_mem.empty(tokens, hidden, device="cuda", dtype=torch.bfloat16)
            symm_mem.rendezvous(sym, group_name)
            sym.copy_(x)
            fi_out = torch.empty_like(x)

            def nccl():
                buf.copy_(x)
                dist.all_reduce(buf)

            direct_out = torch.empty_like(x)
            device = torch.cuda.current_device()

            def ours_ctypes():
                comm.all_reduce(x.data_ptr(), direct_out.data_ptr(), x.numel(), fusedcomm.BFLOAT16,
                                torch._C._cuda_getCurrentRawStream(device))

            fi_peer = peer  # None for this cell alone where FlashInfer refuses its shape
            fns = [lambda: torch.ops.fusedcomm.all_reduce(x, c), nccl,
                   lambda: torch.ops.symm_mem.one_shot_all_reduce(sym, "sum", group_name)]
            if fi_peer is not None:
                fns.append(lambda: fi_peer.all_reduce(x, fi_out))
            nccl()
            want = buf.clone()
            errs = [relerr(fns[0](), want), relerr(fns[2](), want)]
            if fi_peer is not None:
                try:
                    fns[3]()
                    errs.append(relerr(fi_out, want))
                except Exception as e:  # a shape FlashInfer refuses: the same on every rank
                    if rank == 0:
                        print("# %d x %d: no FlashInfer column: %s" % (tokens, hidden, str(e).split("\n")[0]),
                              flush=True)
                    fns.pop()
                    fi_peer = None
            graph = time_graphs(fns)
            eager = time_eager([fns[0], fns[1], ours_ctypes] + ([fns[3]] if fi_peer is not None else []))
            fi, fi_eager = (graph[3], eager[3]) if fi_peer is not None else (0.0, 0.0)
            table.add("%d,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,%.2e,%.2f" % (
                tokens, hidden, tokens * hidden * 2, graph[0], graph[1], graph[2], fi, eager[0], eager[1], fi_eager,
                graph[0] / fi if fi else 0.0, max(errs), eager[2]))
    table.write(args.csv)
    comm.destroy()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
