"""fusedcomm's object exchange through torch.distributed (all_gather_objects, and through
it node_ranks and Communicator.from_process_group) on 3 gloo processes on the CPU, each
with NumPy hidden: torch does not depend on NumPy, and its own object collectives need
it (they turn their bytes back through tensor.numpy()), so the package must not use
them. Checks every rank's objects in rank order (empty, large, unicode, None), a
subgroup, and from_process_group's clean init error without a GPU on every rank.
Exit 77 (skip) without torch or gloo. Needs FC_LIBRARY (or the installed package)."""
import os
import socket
import subprocess
import sys
import warnings

WORLD = 3


def worker(rank, port):
    sys.modules["numpy"] = None  # `import numpy` raises: an installation without it
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # torch's, at import
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("SKIP: torch is not installed for %s" % sys.executable)
        sys.exit(77)
    if not dist.is_available() or not dist.is_gloo_available():
        print("SKIP: this torch has no gloo backend")
        sys.exit(77)
    import fusedcomm

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), CUDA_VISIBLE_DEVICES="")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    failures = []

    def expect(ok, what):
        if not ok:
            failures.append(what)
        if rank == 0:
            print("%-70s %s" % (what, "OK" if ok else "FAIL"))

    numpy_needed = False  # torch's own, for the record: does it fail here as expected?
    try:
        dist.all_gather_object([None] * WORLD, rank)
    except RuntimeError as e:
        numpy_needed = "numpy" in str(e).lower()
    if rank == 0:
        print("torch %s's all_gather_object without NumPy: %s" % (torch.__version__,
                                                                    "fails" if numpy_needed else "works"))

    mine = {"rank": rank, "text": "r\u00e4nk %d" % rank, "blob": bytes(range(256)) * (rank * 40),
            "none": None, "empty": ""}
    got = fusedcomm.all_gather_objects(mine)
    expect(got == [{"rank": r, "text": "r\u00e4nk %d" % r, "blob": bytes(range(256)) * (r * 40), "none": None,
                    "empty": ""} for r in range(WORLD)], "every rank's object, in rank order, of unequal sizes")
    expect(fusedcomm.all_gather_objects(None) == [None] * WORLD, "None from every rank")
    expect(fusedcomm.all_gather_objects(b"") == [b""] * WORLD, "an empty bytes object")
    sub = dist.new_group([0, 2])
    if rank in (0, 2):
        expect(fusedcomm.all_gather_objects(rank * 10, sub) == [0, 20], "a subgroup's ranks in its order")
    dist.barrier()

    os.environ["FC_HOST_ID"] = "node-%d" % (rank // 2)  # ranks 0-1 on one host, 2 on another
    expect(fusedcomm.node_ranks() == [[0, 1], [2]], "node_ranks: the hosts' ranks")
    del os.environ["FC_HOST_ID"]
    try:
        fusedcomm.Communicator.from_process_group().destroy()
        expect(False, "from_process_group: no GPU here, so init must fail")
    except fusedcomm.FcError as e:
        expect(e.code == fusedcomm.UNHANDLED_CUDA_ERROR, "from_process_group: init's error without a GPU (%s)" % e.name)
    dist.barrier()
    dist.destroy_process_group()
    if failures:
        print("rank %d: %d failed: %s" % (rank, len(failures), "; ".join(failures)))
        sys.exit(1)


def main():
    if len(sys.argv) == 3:
        worker(int(sys.argv[1]), int(sys.argv[2]))
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), str(r), str(port)]) for r in range(WORLD)]
    try:
        codes = [p.wait(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    if all(c == 77 for c in codes):
        sys.exit(77)
    if any(c != 0 for c in codes):
        print("FAIL: rank exit codes %s" % codes)
        sys.exit(1)
    print("all object exchange checks passed")


if __name__ == "__main__":
    main()
