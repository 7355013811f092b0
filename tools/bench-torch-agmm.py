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

The caller forms (issue 45): with --forms plain,symmetric, --agathered 0,1 or --msweep,
another table, one row per shape and form, every column of a shape timed in one
interleaved run:

  gemm        cuBLAS GEMM alone on the gathered A
  comm        the all-gather of the A shards alone, our fastest: comm.all_gather from A
              plain (auto) and from A in fcMemAlloc memory (auto, and SM / copy engine
              forced: FC_ALLGATHER_ALGO on communicators of their own); comm_from says which
  nccl        all_gather_into_tensor (NCCL), then the GEMM (its A gathered in any form)
  torch       fused_all_gather_matmul with A plain (a torch tensor) or in torch's symmetric
              memory (symm_mem.empty + rendezvous), return_A as agathered asks (where this
              torch's op has return_A; else the gathered A is always returned)
  ours        fcAllGatherMatmul on the default communicator with A plain or from fcMemAlloc
              (fusedcomm.symmetric_tensor), Agathered NULL or a [M, K] tensor

and per form ours / GEMM, torch / GEMM, NCCL / GEMM, ours / torch, ours / NCCL and the
fixed cost = ours - max(gemm, comm). Shapes: the 12 above (in_public = 1), and with
--msweep also M 512-32768 at the first two layers, Llama-3-8B's QKV and gate_up
(in_sweep = 1; each shape once). GEMMs of >= 1 TFLOP per rank: graphs of 2 calls, 6
replays (calls, replays columns). Checked: C against NCCL + cuBLAS, and Agathered equal
to the NCCL-gathered A.
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
from fusedcomm.bench import (  # noqa: E402
    SWEEP_M, Table, caller_forms, forced_communicators, init_process_group, ints, parse_args, sp_shapes, sp_timing,
    time_graphs)

CALLS, REPLAYS = 5, 15
# (N, K) at 2 ranks: Llama-3-8B's QKV and gate_up, Qwen2.5-32B's QKV and gate_up.
LAYERS = ((3072, 4096), (14336, 4096), (3584, 5120), (27648, 5120))


def main():
    args = parse_args(m="512,2048,8192", forms="", agathered="",
                      flags={"msweep": "the caller-form table, also at M 512-32768 for Llama-3-8B's QKV and gate_up"})
    rank, world = init_process_group("bench-agmm")
    group = dist.group.WORLD
    symm_mem.enable_symm_mem_for_group(group.group_name)
    comm = fusedcomm.Communicator.from_process_group()
    if args.forms or args.agathered or args.msweep:
        forms_table(args, rank, world, group, comm)
    else:
        default_table(args, rank, world, group, comm)
    comm.destroy()
    dist.destroy_process_group()


def default_table(args, rank, world, group, comm):
    os.environ["FC_AGMM_ALGO"] = "engine"  # read at init
    engine = fusedcomm.Communicator.from_process_group()
    del os.environ["FC_AGMM_ALGO"]
    bf16 = fusedcomm.BFLOAT16
    header = "M,N,K,gemm_us,nccl_gemm_us,torch_us,ours_us,ours_sym_us,engine_us,ours_over_gemm,torch_over_gemm,max_relerr"
    table = Table(header, rank, world,
                  "graph of %d calls, median of %d interleaved replays, max over ranks" % (CALLS, REPLAYS))
    for m in ints(args.m):
        for n2, k in LAYERS:
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


def forms_table(args, rank, world, group, comm):
    forms = caller_forms(args.forms, args.agathered)
    forced = forced_communicators("FC_ALLGATHER_ALGO")
    has_return_a = "return_A" in str(torch.ops.symm_mem.fused_all_gather_matmul.default._schema)
    bf16 = fusedcomm.BFLOAT16
    header = ("M,N,K,a,agathered,in_public,in_sweep,gemm_us,comm_us,comm_from,nccl_us,torch_us,ours_us,"
              "ours_over_gemm,torch_over_gemm,nccl_over_gemm,ours_over_torch,ours_over_nccl,fixed_us,max_relerr,"
              "calls,replays")
    note = ("graph of %d calls (2 from 1 TFLOP), median of %d (6) interleaved replays, max over ranks; torch's "
            "return_A %s" % (CALLS, REPLAYS, "as agathered" if has_return_a else "missing: it always returns A"))
    table = Table(header, rank, world, note)
    layers = [(n2 * 2 // world, k) for n2, k in LAYERS]
    public = [(m, n, k) for m in ints(args.m) for n, k in layers]
    sweep = [(m, n, k) for n, k in layers[:2] for m in SWEEP_M] if args.msweep else []
    s = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731
    for m, n, k, in_public, in_sweep in sp_shapes(public, sweep):
        ms = m // world
        g = torch.Generator(device="cuda").manual_seed(m * 7 + n + rank)
        a = torch.randn(ms, k, device="cuda", dtype=torch.bfloat16, generator=g)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16,
                        generator=torch.Generator(device="cuda").manual_seed(n + k))
        a_full = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
        c_ref = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty_like(c_ref)
        a_gathered = torch.empty_like(a_full)  # our Agathered output
        a_symm = symm_mem.empty(ms, k, device="cuda", dtype=torch.bfloat16)  # torch's symmetric memory
        a_symm.copy_(a)
        symm_mem.rendezvous(a_symm, group.group_name)
        # A in fcMemAlloc memory: of the default communicator (ours, comm alone) and of each
        # forced one (symmetric memory belongs to one communicator).
        a_fc = {None: fusedcomm.symmetric_tensor(comm, ms * k, torch.bfloat16).view(ms, k)}
        for algo, on in forced.items():
            a_fc[algo] = fusedcomm.symmetric_tensor(on, ms * k, torch.bfloat16).view(ms, k)
        for t in a_fc.values():
            t.copy_(a)
        comm_alone = [("plain-auto", comm, a), ("symmetric-auto", comm, a_fc[None])]
        comm_alone += [("symmetric-" + algo, on, a_fc[algo]) for algo, on in forced.items()]

        def gemm():
            torch.matmul(a_full, w.t(), out=c_ref)

        def nccl_gemm():
            dist.all_gather_into_tensor(a_full, a)
            gemm()

        def torch_fused(src, return_a):
            kw = {"return_A": return_a} if has_return_a else {}
            return torch.ops.symm_mem.fused_all_gather_matmul(src, [w.t()], gather_dim=0,
                                                              group_name=group.group_name, **kw)

        def ours(sym, gathered):
            comm.all_gather_matmul(a_fc[None].data_ptr() if sym else a.data_ptr(), w.data_ptr(), c.data_ptr(), m, n,
                                   k, bf16, fusedcomm.OP_T, a_gathered.data_ptr() if gathered else None, s())

        def gather(on, src):
            on.all_gather(src.data_ptr(), a_full.data_ptr(), ms * k, bf16, s())

        nccl_gemm()  # the reference: NCCL all-gather + cuBLAS
        torch.cuda.synchronize()
        ref, ref_a = c_ref.float(), a_full.clone()
        scale = ref.abs().max().item()
        errs = []  # per form; NaN (an unwritten, poisoned element) must not vanish in max()
        for sym, gathered in forms:
            c.fill_(float("nan"))
            a_gathered.fill_(float("nan"))
            ours(sym, gathered)
            torch.cuda.synchronize()
            e = [(c.float() - ref).abs().max().item() / scale]
            if gathered:
                e.append(0.0 if torch.equal(a_gathered, ref_a) else float("nan"))
            _, (c_torch,) = torch_fused(a_symm if sym else a, gathered)
            e.append((c_torch.float() - ref).abs().max().item() / scale)
            errs.append(float("nan") if any(x != x for x in e) else max(e))
        fns = [gemm, nccl_gemm] + [lambda on=on, src=src: gather(on, src) for _, on, src in comm_alone]
        for sym, gathered in forms:
            fns.append(lambda sym=sym, gathered=gathered: torch_fused(a_symm if sym else a, gathered))
            fns.append(lambda sym=sym, gathered=gathered: ours(sym, gathered))
        calls, replays = sp_timing(2.0 * m * n * k, CALLS, REPLAYS)
        t = time_graphs(fns, calls, replays)
        gemm_us, nccl_us, comm_t = t[0], t[1], t[2:2 + len(comm_alone)]
        comm_us = min(comm_t)
        comm_from = comm_alone[comm_t.index(comm_us)][0]
        for i, (sym, gathered) in enumerate(forms):
            torch_us, ours_us = t[2 + len(comm_alone) + 2 * i], t[3 + len(comm_alone) + 2 * i]
            table.add("%d,%d,%d,%s,%d,%d,%d,%.1f,%.1f,%s,%.1f,%.1f,%.1f,%.3f,%.3f,%.3f,%.3f,%.3f,%.1f,%.3g,%d,%d" % (
                m, n, k, "symmetric" if sym else "plain", gathered, in_public, in_sweep, gemm_us, comm_us, comm_from,
                nccl_us, torch_us, ours_us, ours_us / gemm_us, torch_us / gemm_us, nccl_us / gemm_us,
                ours_us / torch_us, ours_us / nccl_us, ours_us - max(gemm_us, comm_us), errs[i], calls, replays))
        for algo, on in [(None, comm)] + list(forced.items()):
            on.mem_free(a_fc[algo].data_ptr())
    table.write(args.csv)
    for on in forced.values():
        on.destroy()


if __name__ == "__main__":
    main()
