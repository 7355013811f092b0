"""fcAllReduce and fcAllGatherMatmul on torch tensors, checked against torch.

    tools/fcrun/fcrun -n 4 -- python3 docs/examples/python/example.py

with the package installed (pip install .) or from the source tree (python/ is
found then; FC_LIBRARY names the library to load).
Every rank builds every rank's inputs from seeds, so the expected results are
computed locally with torch, in fp32.
"""
import os
import sys

import torch

try:
    import fusedcomm
except ImportError:  # not installed: the source tree's package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
    import fusedcomm


def inputs(seed, shape, dtype):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)


def main():
    rank, world = int(os.environ["FC_RANK"]), int(os.environ["FC_WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("FC_LOCAL_RANK", rank)))
    lib = fusedcomm.Library()
    stream = torch.cuda.current_stream()
    with fusedcomm.Communicator.from_env(lib) as comm:
        # All-reduce: rank r holds x_r; everyone gets sum_r x_r (fp32 sum, rounded once).
        n = 3 * 1024 * 1024 + 5
        xs = [inputs(100 + r, (n,), torch.bfloat16) for r in range(world)]
        x = xs[rank].cuda()
        y = torch.empty_like(x)
        comm.all_reduce(x.data_ptr(), y.data_ptr(), x.numel(), fusedcomm.dtype_of(x), stream.cuda_stream)
        want = torch.stack([t.float() for t in xs]).sum(0).to(torch.bfloat16)
        ar_err = (y.cpu().float() - want.float()).abs().max().item()

        # All-gather + matmul: C = allgather(A) @ W^T with a torch.nn.Linear-style W [N, K].
        m, n_out, k = 1024 * world, 4096, 2048
        shards = [inputs(200 + r, (m // world, k), torch.bfloat16) for r in range(world)]
        w = inputs(300, (n_out, k), torch.bfloat16)
        a, wd = shards[rank].cuda(), w.cuda()
        c = torch.empty((m, n_out), dtype=torch.bfloat16, device="cuda")
        comm.all_gather_matmul(a.data_ptr(), wd.data_ptr(), c.data_ptr(), m, n_out, k, fusedcomm.BFLOAT16,
                               trans_b=fusedcomm.OP_T, stream=stream.cuda_stream)
        ref = torch.cat(shards).cuda().float() @ wd.float().t()
        mm_err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
        stream.synchronize()

    ok = ar_err == 0.0 and mm_err < 1e-2
    print("rank %d: fcAllReduce max error %g (exact expected), fcAllGatherMatmul rel error %.2e vs torch: %s"
          % (rank, ar_err, mm_err, "OK" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
