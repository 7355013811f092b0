"""CPU tests of the Python package fusedcomm (no GPU needed; CI runs them from the
source tree and, through run-wheel-test, from the installed wheel with
FC_EXPECT_INSTALLED=1): the version agrees with the C library's and the wheel's
metadata, `python -m fusedcomm` answers, the installed package loads its bundled
library with no environment variables, FC_LIBRARY overrides it, errors carry the
result code and fcGetLastError's message, the torch operators (when torch is
importable) register with fake kernels that give the output shapes, and the
multi-node helpers (from_process_group's refusal of a group that spans hosts,
for_node's groups) do what they say, against a stand-in for torch.distributed."""
import os
import re
import socket
import subprocess
import sys
import types
import unittest
from unittest import mock

import fusedcomm

INSTALLED = os.environ.get("FC_EXPECT_INSTALLED") == "1"


class PackageTest(unittest.TestCase):
    def test_version_is_the_librarys(self):
        lib = fusedcomm.library()
        v = lib.version()
        self.assertEqual(fusedcomm.__version__, "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100))
        if INSTALLED:
            from importlib.metadata import version
            self.assertEqual(version("fusedcomm"), fusedcomm.__version__)

    def test_cli(self):
        out = subprocess.run([sys.executable, "-m", "fusedcomm", "--version"], check=True, capture_output=True,
                             text=True).stdout
        self.assertIn("fusedcomm %s, libfusedcomm %s" % (fusedcomm.__version__, fusedcomm.__version__), out)
        info = subprocess.run([sys.executable, "-m", "fusedcomm", "info"], check=True, capture_output=True,
                              text=True).stdout
        self.assertRegex(info, r"device 0: |devices: none: ")

    def test_bundled_library_loads(self):
        if not INSTALLED:
            self.skipTest("from the source tree: FC_LIBRARY names the build's library")
        here = os.path.dirname(os.path.abspath(fusedcomm.__file__))
        self.assertEqual(fusedcomm.find_library(), os.path.join(here, "libfusedcomm.so"))
        self.assertEqual(fusedcomm.library().path, fusedcomm.find_library())

    def test_fc_library_overrides(self):
        env = dict(os.environ, FC_LIBRARY="/nonexistent/libfusedcomm.so")
        r = subprocess.run([sys.executable, "-m", "fusedcomm", "--version"], capture_output=True, text=True, env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("/nonexistent/libfusedcomm.so", r.stderr)

    def test_errors_carry_code_and_message(self):
        with self.assertRaises(fusedcomm.FcError) as cm:
            fusedcomm.Communicator(None, 0, fusedcomm.library().unique_id(), 0)
        self.assertEqual(cm.exception.code, fusedcomm.INVALID_ARGUMENT)
        self.assertEqual(cm.exception.name, fusedcomm.library().error_string(fusedcomm.INVALID_ARGUMENT))
        self.assertIn("nranks", cm.exception.message)
        with self.assertRaises(ValueError):
            fusedcomm.communicator(10 ** 9)  # no such live communicator

    def test_init_without_gpu(self):
        try:
            comm = fusedcomm.Communicator(None, 1, fusedcomm.library().unique_id(), 0)
        except fusedcomm.FcError as e:
            self.assertEqual(e.code, fusedcomm.UNHANDLED_CUDA_ERROR, str(e))
            self.assertRegex(e.message.lower(), "driver|cuda device|gpu")
            return
        with comm:  # a GPU machine: the communicator is registered for the torch ops
            self.assertIs(fusedcomm.communicator(comm.id), comm)
        with self.assertRaises(ValueError):
            fusedcomm.communicator(comm.id)

    def test_torch_ops_register_with_fake_kernels(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed")
        import fusedcomm.ops  # noqa: F401

        class FakeComm:
            def count(self):
                return 4

        fusedcomm._core._LIVE[-1] = FakeComm()
        try:
            from torch._subclasses.fake_tensor import FakeTensorMode
            with FakeTensorMode():
                x = torch.empty(8, 16, dtype=torch.bfloat16, device="cuda")
                w = torch.empty(32, 16, dtype=torch.bfloat16, device="cuda")
                self.assertEqual(torch.ops.fusedcomm.all_reduce(x, -1).shape, (8, 16))
                self.assertEqual(torch.ops.fusedcomm.reduce_scatter(x, -1).shape, (2, 16))
                self.assertEqual(torch.ops.fusedcomm.all_gather(x, -1).shape, (32, 16))
                self.assertEqual(torch.ops.fusedcomm.all_gather_matmul(x, w, -1).shape, (32, 32))
                self.assertEqual(torch.ops.fusedcomm.matmul_reduce_scatter(x, w, -1).shape, (2, 32))
                res, gamma = torch.empty(8, 32, dtype=torch.bfloat16, device="cuda"), w[:, 0].clone()
                scale = torch.empty(1, dtype=torch.float32, device="cuda")
                self.assertEqual(torch.ops.fusedcomm.matmul_all_reduce(x, w, -1).shape, (8, 32))
                out = torch.empty(8, 32, dtype=torch.bfloat16, device="cuda")
                self.assertIs(torch.ops.fusedcomm.matmul_all_reduce_out(x, w, -1, out), out)
                with self.assertRaises(ValueError):  # out not [M, N]
                    torch.ops.fusedcomm.matmul_all_reduce_out(x, w, -1, out[:, :16])
                normed, res_out = torch.ops.fusedcomm.matmul_all_reduce_residual_rmsnorm(x, w, res, gamma, 1e-6, -1)
                self.assertEqual((normed.shape, res_out.shape), ((8, 32), (8, 32)))
                q, res_out = torch.ops.fusedcomm.matmul_all_reduce_residual_rmsnorm_fp8(x, w, res, gamma, scale, 1e-6,
                                                                                         -1)
                self.assertEqual((q.shape, q.dtype, res_out.dtype), ((8, 32), torch.float8_e4m3fn, torch.bfloat16))
                with self.assertRaises(ValueError):  # residual not [M, N]
                    torch.ops.fusedcomm.matmul_all_reduce_residual_rmsnorm(x, w, x, gamma, 1e-6, -1)
                two = torch.empty(2, dtype=torch.float32, device="cuda")
                with self.assertRaises(ValueError):  # scale not one element, both fp8 forms
                    torch.ops.fusedcomm.matmul_all_reduce_residual_rmsnorm_fp8(x, w, res, gamma, two, 1e-6, -1)
                with self.assertRaises(ValueError):
                    torch.ops.fusedcomm.all_reduce_residual_rmsnorm_fp8(res, res, gamma, two, 1e-6, -1)
        finally:
            del fusedcomm._core._LIVE[-1]


class FakeGroup:
    def __init__(self, ranks):
        self.ranks = list(ranks)


class FakeDist(types.ModuleType):
    """torch.distributed as one rank (`me`, a global rank) of a world whose ranks run
    on `hosts` (this_host() tuples by global rank) sees it: all_gather_objects (which
    stands in for fusedcomm's own, the one collective the package runs through torch;
    tests/python/test_object_exchange.py runs the real one) returns every member's
    contribution (rank 0 of a group also contributes a unique id when the gathered
    objects are (host, id) pairs); new_group is recorded."""

    def __init__(self, me, hosts, id_hex):
        super().__init__("torch.distributed")
        self.me, self.hosts, self.id_hex, self.new_groups = me, hosts, id_hex, []
        self.group = types.SimpleNamespace(WORLD=FakeGroup(range(len(hosts))))

    def _ranks(self, group):
        return (group or self.group.WORLD).ranks

    def get_rank(self, group=None):
        return self._ranks(group).index(self.me)

    def get_world_size(self, group=None):
        return len(self._ranks(group))

    def get_global_rank(self, group, rank):
        if group is self.group.WORLD:
            raise ValueError("group.WORLD does not have local rank to global rank mapping")  # as torch
        return group.ranks[rank]

    def all_gather_objects(self, obj, group=None):
        out = []
        for i, g in enumerate(self._ranks(group)):
            if g == self.me:
                out.append(obj)
            elif isinstance(obj[0], tuple):  # from_process_group: (host, id of the group's rank 0)
                out.append((self.hosts[g], self.id_hex if i == 0 else None))
            else:  # node_ranks: the host
                out.append(self.hosts[g])
        return out

    def new_group(self, ranks, use_local_synchronization=False):
        self.new_groups.append((list(ranks), use_local_synchronization))
        return FakeGroup(ranks)


class FakeInitLibrary:
    """The real library, except that init and destroy are recorded instead of run."""

    def __init__(self):
        self.real, self.inits = fusedcomm.library(), []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def fcCommInitRankConfig(self, handle, nranks, uid, rank, config):
        self.inits.append((nranks, rank, uid.hex()))
        handle._obj.value = 1  # ctypes.byref(...) of the Communicator's handle
        return fusedcomm.SUCCESS

    def fcCommDestroy(self, handle):
        return fusedcomm.SUCCESS


def host(name, boot="0123456789abcdef"):
    return ("FC_HOST_ID=" + name, name, "") if boot is None else (name + "\n" + boot, name, boot)


class MultiNodeTest(unittest.TestCase):
    def dist(self, me, names):
        """Rank `me` of a world whose ranks run on hosts `names` (FC_HOST_ID, set here for
        this rank): patches `import torch.distributed` to a FakeDist and returns it."""
        fake = FakeDist(me, [host(n, None) for n in names], fusedcomm.library().unique_id().hex())
        torch = types.ModuleType("torch")
        torch.distributed = fake
        for patcher in (mock.patch.dict(sys.modules, {"torch": torch, "torch.distributed": fake}),
                        mock.patch.object(fusedcomm._core, "all_gather_objects", fake.all_gather_objects),
                        mock.patch.dict(os.environ, {"FC_HOST_ID": names[me]})):
            patcher.start()
            self.addCleanup(patcher.stop)
        return fake

    def test_this_host(self):
        with mock.patch.dict(os.environ, {"FC_HOST_ID": "node-7"}):
            self.assertEqual(fusedcomm._core.this_host(), ("FC_HOST_ID=node-7", "node-7", ""))
        with mock.patch.dict(os.environ, {"FC_HOST_ID": ""}):  # empty: not set
            key, name, boot = fusedcomm._core.this_host()
        self.assertEqual(name, socket.gethostname())
        self.assertEqual(key, name + "\n" + boot)
        if os.path.exists("/proc/sys/kernel/random/boot_id"):
            self.assertRegex(boot, "^[0-9a-f-]{36}$")

    def test_refusal_message_is_the_librarys(self):
        msg = fusedcomm._core.spanning_hosts_message
        a, b = host("node-a"), host("node-b", "ba9876543210")
        self.assertIsNone(msg([a, a, a]))
        self.assertIn("2 hosts (ranks 0-1 on 'node-a', ranks 2-3 on 'node-b'): ", msg([a, a, b, b]))
        self.assertIn("(ranks 0,2 on 'node-b', ranks 1,3-4 on 'node-a')", msg([b, a, b, a, a]))
        self.assertIn("rank 0 on 'node-a' (boot id 01234567), rank 1 on 'node-a' (boot id fedcba98)",
                      msg([a, host("node-a", "fedcba987654")]))
        many = msg([host("h%d" % (r // 2)) for r in range(64)])
        self.assertIn("32 hosts (ranks 0-1 on 'h0', ranks 2-3 on 'h1', ranks 4-5 on 'h2', ranks 6-7 on 'h3', "
                      "and 28 more hosts): ", many)
        self.assertTrue(many.endswith(fusedcomm._core.ONE_NODE_ADVICE))
        # The advice is the C library's, word for word (tests/cpu/test_bootstrap.cc checks the rest there).
        source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "bootstrap", "host.cc")
        if not os.path.exists(source):
            self.skipTest("no source tree beside this test")
        with open(source) as f:
            text = f.read()
        literal = re.search(r"kOneNodeAdvice =\s*((?:\s*\"(?:[^\"\\]|\\.)*\")+);", text).group(1)
        c_advice = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', literal)).replace('\\"', '"')
        self.assertEqual(c_advice, fusedcomm._core.ONE_NODE_ADVICE)

    def test_from_process_group_refuses_a_group_across_hosts(self):
        for me in range(4):
            self.dist(me, ["node-a", "node-a", "node-b", "node-b"])
            lib = FakeInitLibrary()
            with self.assertRaises(fusedcomm.FcError) as cm:
                fusedcomm.Communicator.from_process_group(lib=lib)
            self.assertEqual(cm.exception.code, fusedcomm.INVALID_USAGE)
            self.assertIn("ranks 0-1 on 'node-a', ranks 2-3 on 'node-b'", cm.exception.message)
            self.assertIn("Communicator.for_node", cm.exception.message)
            self.assertEqual(lib.inits, [])  # refused before any init
        # One host: the id of the group's first rank, on every rank.
        fake = self.dist(1, ["node-a"] * 2)
        lib = FakeInitLibrary()
        fusedcomm.Communicator.from_process_group(lib=lib).destroy()
        self.assertEqual(lib.inits, [(2, 1, fake.id_hex)])

    def test_for_node_in_the_world(self):
        for me in range(4):
            fake = self.dist(me, ["node-a", "node-b", "node-a", "node-b"])
            lib = FakeInitLibrary()
            with fusedcomm.Communicator.for_node(lib=lib) as comm:
                # Every rank makes every node's group, in the same order.
                self.assertEqual(fake.new_groups, [([0, 2], False), ([1, 3], False)])
                self.assertEqual(comm.nodes, [[0, 2], [1, 3]])
                self.assertEqual(comm.node_group.ranks, [me % 2, me % 2 + 2])
                self.assertEqual(len(lib.inits), 1)
                self.assertEqual(lib.inits[0][:2], (2, me // 2))
                if me // 2 == 1:  # the id of the node's first rank
                    self.assertEqual(lib.inits[0][2], fake.id_hex)

    def test_for_node_in_a_subgroup(self):
        # Global ranks 1-3 of a world of 4, on hosts a, b, b: each node makes its own group.
        fake = self.dist(3, ["node-z", "node-a", "node-b", "node-b"])
        lib = FakeInitLibrary()
        with fusedcomm.Communicator.for_node(FakeGroup([1, 2, 3]), lib=lib) as comm:
            self.assertEqual(comm.nodes, [[1], [2, 3]])
            self.assertEqual(fake.new_groups, [([2, 3], True)])
            self.assertEqual(lib.inits, [(2, 1, fake.id_hex)])


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
