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

The caller forms (issue 45): with --forms plain,symmetric or --msweep, another table, one
row per shape and form, every column of a shape timed in one interleaved run:

  gemm        cuBLAS GEMM alone (the [M, N] partial)
  comm        the reduce-scatter of the [M, N] partials alone, our fastest:
              comm.reduce_scatter from a plain tensor (auto) and from fcMemAlloc memory
              (auto, and SM / copy engine forced: FC_REDUCE_SCATTER_ALGO on communicators
              of their own); comm_from says which
  nccl        the GEMM, then reduce_scatter_tensor (NCCL)
  torch       fused_matmul_reduce_scatter with A plain or in torch's symmetric memory
  ours        fcMatmulReduceScatter with A plain or from fcMemAlloc
              (fusedcomm.symmetric_tensor), partials in bf16

and per form ours / GEMM, torch / GEMM, NCCL / GEMM, ours / torch, ours / NCCL and the
fixed cost = ours - max(gemm, comm). Shapes: the 12 above (in_public = 1), and with
--msweep also M 512-32768 at Llama-3-8B's o_proj and down_proj (in_sweep = 1; each
shape once). GEMMs of >= 1 TFLOP per rank: graphs of 2 calls, 6 replays.
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
from fusedcomm.bench import (  # noqa: E402
    SWEEP_M, Table, caller_forms, forced_communicators, init_process_group, ints, parse_args, sp_shapes, sp_timing,
    time_graphs)

CALLS, REPLAYS = 5, 15
# (N, K) at 2 ranks: Llama-3-8B's down_proj and o_proj, Qwen2.5-32B's down_proj and o_proj.
LAYERS = ((4096, 7168), (4096, 2048), (5120, 13824), (5120, 2560))


def main():
    args = parse_args(m="512,2048,8192", forms="",
                      flags={"msweep": "the caller-form table, also at M 512-32768 for Llama-3-8B's o_proj and "
                                       "down_proj"})
    rank, world = init_process_group("bench-mmrs")
    comm = fusedcomm.Communicator.from_process_group()
    if args.forms or args.msweep:
        forms_table(args, rank, world, comm)
    else:
        default_table(args, rank, world, comm)
    comm.destroy()
    dist.destroy_process_group()


def default_table(args, rank, world, comm):
    group_name = dist.group.WORLD.group_name
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
        for n, k2 in LAYERS:
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


def forms_table(args, rank, world, comm):
    import torch.distributed._symmetric_memory as symm_mem
    group_name = dist.group.WORLD.group_name
    symm_mem.enable_symm_mem_for_group(group_name)
    forms = [sym for sym, _ in caller_forms(args.forms, "0")]
    forced = forced_communicators("FC_REDUCE_SCATTER_ALGO")
    bf16 = fusedcomm.BFLOAT16
    header = ("M,N,K,a,in_public,in_sweep,gemm_us,comm_us,comm_from,nccl_us,torch_us,ours_us,ours_over_gemm,"
              "torch_over_gemm,nccl_over_gemm,ours_over_torch,ours_over_nccl,fixed_us,max_relerr,calls,replays")
    table = Table(header, rank, world, "graph of %d calls (2 from 1 TFLOP), median of %d (6) interleaved replays, "
                  "max over ranks; partials in bf16" % (CALLS, REPLAYS))
    layers = [(n, k2 * 2 // world) for n, k2 in LAYERS]
    public = [(m, n, k) for m in ints(args.m) for n, k in layers]
    # The sweep's layers: o_proj, then down_proj.
    sweep = [(m, n, k) for n, k in (layers[1], layers[0]) for m in SWEEP_M] if args.msweep else []
    s = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731
    for m, n, k, in_public, in_sweep in sp_shapes(public, sweep):
        g = torch.Generator(device="cuda").manual_seed(m * 7 + k + rank)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
        p = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref_out = torch.empty(m // world, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty_like(ref_out)
        rs_out = torch.empty_like(ref_out)  # the reduce-scatter alone's output
        a_symm = symm_mem.empty(m, k, device="cuda", dtype=torch.bfloat16)  # torch's symmetric memory
        a_symm.copy_(a)
        symm_mem.rendezvous(a_symm, group_name)
        a_fc = fusedcomm.symmetric_tensor(comm, m * k, torch.bfloat16).view(m, k)
        a_fc.copy_(a)
        # The partials in fcMemAlloc memory of each communicator that reduces them.
        p_fc = {algo: fusedcomm.symmetric_tensor(on, m * n, torch.bfloat16).view(m, n)
                for algo, on in [(None, comm)] + list(forced.items())}
        comm_alone = [("plain-auto", comm, p), ("symmetric-auto", comm, p_fc[None])]
        comm_alone += [("symmetric-" + algo, on, p_fc[algo]) for algo, on in forced.items()]

        def gemm():
            torch.matmul(a, w.t(), out=p)

        def nccl():
            gemm()
            dist.reduce_scatter_tensor(ref_out, p)

        def torch_fused(sym):
            return torch.ops.symm_mem.fused_matmul_reduce_scatter(a_symm if sym else a, w.t(), "sum", scatter_dim=0,
                                                                  group_name=group_name)

        def ours(sym):
            comm.matmul_reduce_scatter((a_fc if sym else a).data_ptr(), w.data_ptr(), c.data_ptr(), m, n, k, bf16,
                                       fusedcomm.OP_T, s())

        def scatter(on, src):
            on.reduce_scatter(src.data_ptr(), rs_out.data_ptr(), m // world * n, bf16, s())

        nccl()  # the reference
        torch.cuda.synchronize()
        for t in p_fc.values():
            t.copy_(p)
        ref = ref_out.float()
        scale = ref.abs().max().item()
        errs = []  # per form; NaN (an unwritten, poisoned element) must not vanish in max()
        for sym in forms:
            c.fill_(float("nan"))
            ours(sym)
            torch.cuda.synchronize()
            e = [(c.float() - ref).abs().max().item() / scale,
                 (torch_fused(sym).float() - ref).abs().max().item() / scale]
            errs.append(float("nan") if any(x != x for x in e) else max(e))
        fns = [gemm, nccl] + [lambda on=on, src=src: scatter(on, src) for _, on, src in comm_alone]
        for sym in forms:
            fns += [lambda sym=sym: torch_fused(sym), lambda sym=sym: ours(sym)]
        calls, replays = sp_timing(2.0 * m * n * k, CALLS, REPLAYS)
        t = time_graphs(fns, calls, replays)
        gemm_us, nccl_us, comm_t = t[0], t[1], t[2:2 + len(comm_alone)]
        comm_us = min(comm_t)
        comm_from = comm_alone[comm_t.index(comm_us)][0]
        for i, sym in enumerate(forms):
            torch_us, ours_us = t[2 + len(comm_alone) + 2 * i], t[3 + len(comm_alone) + 2 * i]
            table.add("%d,%d,%d,%s,%d,%d,%.1f,%.1f,%s,%.1f,%.1f,%.1f,%.3f,%.3f,%.3f,%.3f,%.3f,%.1f,%.3g,%d,%d" % (
                m, n, k, "symmetric" if sym else "plain", in_public, in_sweep, gemm_us, comm_us, comm_from, nccl_us,
                torch_us, ours_us, ours_us / gemm_us, torch_us / gemm_us, nccl_us / gemm_us, ours_us / torch_us,
                ours_us / nccl_us, ours_us - max(gemm_us, comm_us), errs[i], calls, replays))
        comm.mem_free(a_fc.data_ptr())
        for algo, on in [(None, comm)] + list(forced.items()):
            on.mem_free(p_fc[algo].data_ptr())
    table.write(args.csv)
    for on in forced.values():
        on.destroy()


if __name__ == "__main__":
    main()
