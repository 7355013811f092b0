"""CPU tests of the Python package fusedcomm (no GPU needed; CI runs them from the
source tree and, through run-wheel-test, from the installed wheel with
FC_EXPECT_INSTALLED=1): the version agrees with the C library's and the wheel's
metadata, `python -m fusedcomm` answers, the installed package loads its bundled
library with no environment variables, FC_LIBRARY overrides it, errors carry the
result code and fcGetLastError's message, and the torch operators (when torch is
importable) register with fake kernels that give the output shapes."""
import os
import subprocess
import sys
import unittest

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
                normed, res_out = torch.ops.fusedcomm.matmul_all_reduce_residual_rmsnorm(x, w, res, gamma, 1e-6, -1)
                self.assertEqual((normed.shape, res_out.shape), ((8, 32), (8, 32)))
                q, res_out = torch.ops.fusedcomm.matmul_all_reduce_residual_rmsnorm_fp8(x, w, res, gamma, scale, 1e-6,
                                                                                         -1)
                self.assertEqual((q.shape, q.dtype, res_out.dtype), ((8, 32), torch.float8_e4m3fn, torch.bfloat16))
                with self.assertRaises(ValueError):  # residual not [M, N]
                    torch.ops.fusedcomm.matmul_all_reduce_residual_rmsnorm(x, w, x, gamma, 1e-6, -1)
        finally:
            del fusedcomm._core._LIVE[-1]


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
