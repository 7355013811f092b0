#!/usr/bin/env python3
"""The row-parallel linear + all-reduce + residual add + RMSNorm (o_proj, down_proj of
Megatron-style tensor parallelism, issue 42) from PyTorch, side by side in one run:

  gemm         torch.matmul alone (this rank's product, [M, N])
  nccl_torch   torch.matmul, dist.all_reduce (NCCL), then the residual add and rms_norm in
               torch (fused_add_rms_norm's math, as an engine without a fused kernel runs it)
  flashinfer   torch.matmul, then FlashInfer's trtllm_allreduce_fusion pattern
               kARResidualRMSNorm (what vLLM runs at -O2), when importable (0 otherwise)
  ours_arnorm  torch.matmul, then torch.ops.fusedcomm.all_reduce_residual_rmsnorm
  fused        torch.ops.fusedcomm.matmul_all_reduce_residual_rmsnorm (fcMatmulAllReduce-
               ResidualRMSNorm: its path as FC_MMAR_ALGO and the shape choose)
  ar_alone     torch.ops.fusedcomm.all_reduce of the [M, N] product alone (issue 42's
               large-M target: fused <= 1.10 x max(gemm, ar_alone))

    PYTHONPATH=<installed package> build/tools/fcrun/fcrun -n 2 -- python3 tools/bench-torch-mmar.py [--csv FILE]

Shapes: the row-parallel layers of Llama-3-8B (o_proj N 4096 K 2048, down_proj N 4096
K 7168) and Qwen2.5-32B (o_proj N 5120 K 2560, down_proj N 5120 K 13824) at TP 2 (at W
ranks K is scaled by 2/W), M (tokens) in --m; bf16, the weight an nn.Linear's [N, K].
Time per call: graph-replayed, the columns' graphs replayed in turn (fusedcomm.bench.
time_graphs: 20 calls per graph up to 512 tokens, 5 beyond; median of 15 rounds, max over
ranks), then eager (time_eager: 20 calls back to back + synchronize, median of 15 rounds).
Every column's result is first checked against a float32 reference (the fp32 products
summed by dist.all_reduce, + residual, RMSNorm in fp32): max error relative to the largest
magnitude, of normed and residual_out (the GEMM alone: of its product), max over ranks;
check FAIL (and exit status 1) beyond 2e-2. --cold-weight: every call its own copy of the
weight, the copies together twice the L2 (fusedcomm.weights.weight_ring), so that each call
reads it from HBM, as a model's decode step does; by default one weight, which L2 keeps
across a graph's calls wherever it fits.
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
    ints, parse_args, relerr, time_eager, time_graphs)
from fusedcomm.weights import weight_ring  # noqa: E402

EPS = 1e-6
TOL = 2e-2
# (layer, N, K at TP 2)
LAYERS = (("llama3-8b.o_proj", 4096, 2048), ("llama3-8b.down_proj", 4096, 7168),
          ("qwen2.5-32b.o_proj", 5120, 2560), ("qwen2.5-32b.down_proj", 5120, 13824))
COLUMNS = ("gemm", "nccl_torch", "flashinfer", "ours_arnorm", "fused", "ar_alone")


def torch_norm(summed, residual, weight):
    r = summed + residual
    return torch.nn.functional.rms_norm(r, (r.shape[-1],), weight, EPS), r


def main():
    args = parse_args(flags={"cold-weight": "every call its own copy of the weight, the copies twice the L2 "
                                            "(as a model's decode step reads it; default: one weight, hot in L2)"},
                      m="1,4,16,64,128,256,512,2048,8192")
    rank, world = init_process_group("bench-mmar")
    comm = fusedcomm.Communicator.from_process_group()
    c = comm.id
    header = ("layer,M,N,K," + ",".join(col + "_us" for col in COLUMNS) +
              ",fused_over_gemm,fused_minus_gemm_us,fused_over_best_unfused," +
              ",".join(col + "_eager_us" for col in COLUMNS[:5]) +
              ",relerr_nccl_torch,relerr_flashinfer,relerr_ours_arnorm,relerr_fused,check")
    table = Table(header, rank, world,
                  "bf16, graph of 20 calls (M <= 512) or 5, median of 15 interleaved replays, max over ranks; "
                  "eager: 20 calls + sync, median of 15; FC_MMAR_ALGO=%s; weight %s" % (
                      os.environ.get("FC_MMAR_ALGO", "auto"), "cold (--cold-weight)" if args.cold_weight else "hot"))
    ms = ints(args.m)
    failed = False
    for hidden, peer in flashinfer_by_hidden(rank, world, max(ms), sorted({n for _, n, _ in LAYERS})):
        for layer, n, k2 in LAYERS:
            if n != hidden:
                continue
            k = k2 * 2 // world
            for m in ms:
                g = torch.Generator(device="cuda").manual_seed(m * 7 + n + k + rank)
                a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
                w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g) / k ** 0.5
                wn = weight_ring(w, args.cold_weight)
                g0 = torch.Generator(device="cuda").manual_seed(m * 7 + n + k)  # the same on every rank
                residual = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=g0)
                weight = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g0)
                p = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
                fi_res, fi_norm = torch.empty_like(p), torch.empty_like(p)

                def gemm():
                    return torch.matmul(a, wn().t(), out=p)

                def nccl_torch():
                    gemm()
                    dist.all_reduce(p)
                    return torch_norm(p, residual, weight)

                def flashinfer():
                    gemm()
                    peer.all_reduce_residual_rmsnorm(p, residual, weight, EPS, fi_res, fi_norm)
                    return fi_norm, fi_res

                def ours_arnorm():
                    return torch.ops.fusedcomm.all_reduce_residual_rmsnorm(gemm(), residual, weight, EPS, c)

                def fused():
                    return torch.ops.fusedcomm.matmul_all_reduce_residual_rmsnorm(a, wn(), residual, weight, EPS, c)

                def ar_alone():
                    return torch.ops.fusedcomm.all_reduce(p, c)

                # The float32 reference, then every column's result against it (the
                # columns in turn: each returns (normed, residual_out) of its own call).
                prod = a.float() @ w.float().t()
                summed = prod.clone()
                dist.all_reduce(summed)
                want_res = summed + residual.float()
                want_norm = torch.nn.functional.rms_norm(want_res, (n,), weight.float(), EPS)
                errs = [relerr(gemm(), prod)]
                for fn in (nccl_torch, flashinfer if peer is not None else None, ours_arnorm, fused):
                    if fn is None:
                        errs.append(0.0)
                        continue
                    normed, res = fn()
                    errs.append(max(relerr(normed, want_norm), relerr(res, want_res)))
                errs = torch.tensor([float("inf") if e != e else e for e in errs], device="cuda")  # NaN: a failure
                dist.all_reduce(errs, op=dist.ReduceOp.MAX)
                errs = errs.tolist()
                ok = max(errs) <= TOL
                failed |= not ok
                fns = [gemm, nccl_torch, flashinfer if peer is not None else gemm, ours_arnorm, fused, ar_alone]
                calls = 20 if m <= 512 else 5
                us = time_graphs(fns, calls=calls)
                eager = time_eager(fns[:5])
                if peer is None:
                    us[2] = eager[2] = 0.0
                unfused = [t for t in (us[1], us[2], us[3]) if t > 0]
                row = "%s,%d,%d,%d," % (layer, m, n, k) + ",".join("%.2f" % t for t in us) + ",%.3f,%.2f,%.3f," % (
                    us[4] / us[0], us[4] - us[0], us[4] / min(unfused)) + ",".join("%.2f" % t for t in eager) + \
                    "," + ",".join("%.2e" % e for e in errs[1:]) + ",%s" % ("OK" if ok else "FAIL")
                table.add(row)
    table.write(args.csv)
    comm.destroy()
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
