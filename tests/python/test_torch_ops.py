"""torch.ops.fusedcomm.* on GPUs, one process per rank (tools/fcrun; torch and the
package installed, or PYTHONPATH=python with FC_LIBRARY). The communicator comes from
a torch.distributed process group. Each op is checked against torch in fp32 with
fresh random inputs (every rank makes every rank's inputs from seeds), eagerly, under
torch.compile(fullgraph=True) and replayed from a CUDA graph; a tensor over
symmetric memory is freed with it. Exit 77 (skip) without torch or GPUs."""
import os
import sys
import tempfile

try:
    import torch
    import torch.distributed as dist
except ImportError:
    print("SKIP: torch is not installed")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: no CUDA GPU here")
    sys.exit(77)

import fusedcomm  # noqa: E402
import fusedcomm.ops  # noqa: E402,F401

failures = []


def check(name, got, want, tol):
    err = (got.float() - want).abs().max().item() / max(1.0, want.abs().max().item())
    ok = err <= tol and not torch.isnan(got).any().item()
    print("%-48s relerr %.2e %s" % (name, err, "OK" if ok else "FAIL"), flush=True)
    if not ok:
        failures.append(name)


def inputs(seed, shape, dtype):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def main():
    rank, world = int(os.environ["FC_RANK"]), int(os.environ["FC_WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("FC_LOCAL_RANK", rank)) % torch.cuda.device_count())
    tag = os.environ["FC_UNIQUE_ID"][:16]
    # FC_TORCH_BACKEND=gloo where ranks share a GPU (FC_SHARE_GPU=1), which NCCL refuses;
    # the process group only carries the communicator's unique id.
    backend = os.environ.get("FC_TORCH_BACKEND", "nccl")
    dist.init_process_group(backend, init_method="file://" + os.path.join(tempfile.gettempdir(), "fc-ops-" + tag),
                            rank=rank, world_size=world,
                            device_id=torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else None)
    seed = int(tag, 16) % 100000
    bf16 = torch.bfloat16
    with fusedcomm.Communicator.from_process_group() as comm:
        c = comm.id
        m, k, n = 64 * world, 256, 384
        xs = [inputs(seed + r, (m, k), bf16) for r in range(world)]
        ws = [inputs(seed + 100 + r, (n, k), bf16) for r in range(world)]
        x, w = xs[rank].cuda(), ws[rank].cuda()
        total = sum(t.float() for t in xs).cuda()
        rows = slice(rank * m // world, (rank + 1) * m // world)
        shard = x[rows]
        gathered = torch.cat([t[r * m // world:(r + 1) * m // world] for r, t in enumerate(xs)]).float().cuda()
        want = {
            "all_reduce": total,
            "reduce_scatter": total[rows],
            "all_gather": gathered,
            "all_gather_matmul": gathered @ w.float().t(),
            "matmul_reduce_scatter": sum(xs[r].float() @ ws[r].float().t() for r in range(world)).cuda()[rows],
        }
        calls = {
            "all_reduce": lambda: torch.ops.fusedcomm.all_reduce(x, c),
            "reduce_scatter": lambda: torch.ops.fusedcomm.reduce_scatter(x, c),
            "all_gather": lambda: torch.ops.fusedcomm.all_gather(shard, c),
            "all_gather_matmul": lambda: torch.ops.fusedcomm.all_gather_matmul(shard, w, c),
            "matmul_reduce_scatter": lambda: torch.ops.fusedcomm.matmul_reduce_scatter(x, w, c),
        }
        # all_reduce_residual_rmsnorm: 5 tokens x 256, residual and weight the same on
        # every rank; the reference in fp32 from the bf16 residual_out it returns.
        xs_n = [inputs(seed + 200 + r, (5, 256), bf16) for r in range(world)]
        res_n, w_n = inputs(seed + 300, (5, 256), bf16).cuda(), inputs(seed + 301, (256,), bf16).cuda()
        x_n = xs_n[rank].cuda()
        want["all_reduce_residual_rmsnorm"] = sum(t.float() for t in xs_n).cuda() + res_n.float()
        calls["all_reduce_residual_rmsnorm"] = lambda: torch.ops.fusedcomm.all_reduce_residual_rmsnorm(
            x_n, res_n, w_n, 1e-6, c)[1]
        normed, res_out = torch.ops.fusedcomm.all_reduce_residual_rmsnorm(x_n, res_n, w_n, 1e-6, c)
        r32 = res_out.float()
        want_normed = r32 * torch.rsqrt(r32.pow(2).mean(-1, keepdim=True) + 1e-6) * w_n.float()
        check("eager all_reduce_residual_rmsnorm normed", normed, want_normed, 2e-2)
        # The fp8 variant: e4m3 of normed / scale (3 mantissa bits: each value within 1/16
        # of itself, so within 1/16 of the largest; 0.07 leaves the fp32 arithmetic room).
        scale = torch.tensor([0.05], device="cuda")
        q, res_q = torch.ops.fusedcomm.all_reduce_residual_rmsnorm_fp8(x_n, res_n, w_n, scale, 1e-6, c)
        check("eager all_reduce_residual_rmsnorm_fp8 residual", res_q, want["all_reduce_residual_rmsnorm"], 2e-2)
        check("eager all_reduce_residual_rmsnorm_fp8 q", q.float() * 0.05, want_normed.clamp(-448 * 0.05, 448 * 0.05),
              0.07)
        # The row-parallel linear (issue 42): matmul_all_reduce on the m x k inputs above,
        # and its residual + RMSNorm forms on 5 tokens (not a multiple of the world size:
        # the all-reduce path), against the fp32 matmul summed over ranks (what matmul +
        # all-reduce computes), + the residual, RMSNorm of the residual_out returned.
        want["matmul_all_reduce"] = sum(xs[r].float() @ ws[r].float().t() for r in range(world)).cuda()
        calls["matmul_all_reduce"] = lambda: torch.ops.fusedcomm.matmul_all_reduce(x, w, c)
        # Its out= form, into a plain tensor and into a symmetric one (the large-M path's
        # peers store into the latter directly).
        out_mm = torch.empty(m, n, dtype=bf16, device="cuda")
        want["matmul_all_reduce_out"] = want["matmul_all_reduce"]
        calls["matmul_all_reduce_out"] = lambda: torch.ops.fusedcomm.matmul_all_reduce_out(x, w, c, out_mm)
        sym_mm = fusedcomm.symmetric_tensor(comm, m * n, bf16, free_with_tensor=True).view(m, n)
        check("eager matmul_all_reduce_out symmetric", torch.ops.fusedcomm.matmul_all_reduce_out(x, w, c, sym_mm),
              want["matmul_all_reduce"], 2e-2)
        as_m = [inputs(seed + 400 + r, (5, k), bf16) for r in range(world)]
        a_m, res_m = as_m[rank].cuda(), inputs(seed + 500, (5, n), bf16).cuda()
        g_m = inputs(seed + 501, (n,), bf16).cuda()

        def mmar_norm():
            return torch.ops.fusedcomm.matmul_all_reduce_residual_rmsnorm(a_m, w, res_m, g_m, 1e-6, c)

        want["matmul_all_reduce_residual_rmsnorm"] = sum(
            as_m[r].float() @ ws[r].float().t() for r in range(world)).cuda() + res_m.float()
        calls["matmul_all_reduce_residual_rmsnorm"] = lambda: mmar_norm()[1]
        normed_m, res_out_m = mmar_norm()
        r32 = res_out_m.float()
        want["matmul_all_reduce_residual_rmsnorm normed"] = r32 * torch.rsqrt(
            r32.pow(2).mean(-1, keepdim=True) + 1e-6) * g_m.float()
        calls["matmul_all_reduce_residual_rmsnorm normed"] = lambda: mmar_norm()[0]
        check("eager matmul_all_reduce_residual_rmsnorm normed", normed_m,
              want["matmul_all_reduce_residual_rmsnorm normed"], 2e-2)
        q_m, res_q_m = torch.ops.fusedcomm.matmul_all_reduce_residual_rmsnorm_fp8(a_m, w, res_m, g_m, scale, 1e-6, c)
        check("eager matmul_all_reduce_residual_rmsnorm_fp8 residual", res_q_m,
              want["matmul_all_reduce_residual_rmsnorm"], 2e-2)
        check("eager matmul_all_reduce_residual_rmsnorm_fp8 q", q_m.float() * 0.05,
              want["matmul_all_reduce_residual_rmsnorm normed"].clamp(-448 * 0.05, 448 * 0.05), 0.07)
        tol = {"all_reduce": 2e-2, "all_reduce_residual_rmsnorm": 2e-2, "reduce_scatter": 2e-2, "all_gather": 0, "all_gather_matmul": 2e-2,
               "matmul_reduce_scatter": 2e-2, "matmul_all_reduce": 2e-2, "matmul_all_reduce_out": 2e-2,
               "matmul_all_reduce_residual_rmsnorm": 2e-2,
               "matmul_all_reduce_residual_rmsnorm normed": 2e-2}
        for name, call in calls.items():
            check("eager " + name, call(), want[name], tol[name])
        # torch.compile, whole graph: the ops trace through their fake kernels.
        compiled = torch.compile(lambda a, s, b: (torch.ops.fusedcomm.all_reduce(a, c) * 2,
                                                  torch.ops.fusedcomm.all_gather_matmul(s, b, c)), fullgraph=True)
        y, z = compiled(x, shard, w)
        check("compiled all_reduce * 2", y, 2 * want["all_reduce"], 2e-2)
        check("compiled all_gather_matmul", z, want["all_gather_matmul"], 2e-2)
        compiled_mm = torch.compile(lambda a, b, am, r, g: (torch.ops.fusedcomm.matmul_all_reduce(a, b, c) * 2,
                                                          *torch.ops.fusedcomm.matmul_all_reduce_residual_rmsnorm(
                                                              am, b, r, g, 1e-6, c)), fullgraph=True)
        y, normed_c, res_c = compiled_mm(x, w, a_m, res_m, g_m)
        check("compiled matmul_all_reduce * 2", y, 2 * want["matmul_all_reduce"], 2e-2)
        check("compiled matmul_all_reduce_residual_rmsnorm", res_c, want["matmul_all_reduce_residual_rmsnorm"], 2e-2)
        check("compiled matmul_all_reduce_residual_rmsnorm normed", normed_c,
              want["matmul_all_reduce_residual_rmsnorm normed"], 2e-2)
        # A CUDA graph of every op, replayed twice on fresh inputs.
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            outs = {name: call() for name, call in calls.items()}
        for _ in range(2):
            for o in outs.values():
                o.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
        for name in calls:
            check("graph " + name, outs[name], want[name], tol[name])
        # A tensor over symmetric memory (zero-copy input), freed with the tensor.
        sym = fusedcomm.symmetric_tensor(comm, m * k, bf16, free_with_tensor=True).view(m, k)
        sym.copy_(x)
        check("symmetric all_reduce", torch.ops.fusedcomm.all_reduce(sym, c), want["all_reduce"], 2e-2)
        torch.cuda.synchronize()
        del sym, sym_mm
        comm.barrier(torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
    dist.destroy_process_group()
    if failures:
        print("FAILED: %s" % ", ".join(failures))
        return 1
    print("all torch ops checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
