"""CPU part of the ctypes module's tests (runs in CI, no GPU needed): the library
loads through ctypes, reports its version, names every error code, makes distinct
unique ids, and a one-rank init on a machine without a GPU raises FcError carrying
fcUnhandledCudaError and the library's message. On a GPU machine the init succeeds
instead, and a communicator of one rank answers its getters."""
import os
import sys
import unittest

import fusedcomm


class CtypesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = fusedcomm.Library(os.environ.get("FC_LIBRARY"))

    def test_version(self):
        self.assertEqual(self.lib.version(), 300)  # 0.3.0: FC_MAJOR*10000 + FC_MINOR*100 + FC_PATCH
        # The module declares the same header version it stamps into fcConfig_t.
        self.assertEqual(fusedcomm.VERSION_CODE, self.lib.version())

    def test_config_layout(self):
        import ctypes
        cfg = fusedcomm.Config(channels=1)
        self.assertEqual(ctypes.sizeof(cfg), 64)  # fcConfig_t on LP64 since 0.2
        self.assertEqual((cfg.size, cfg.magic, cfg.channels, cfg.scratchBytes, cfg.fp32Partials),
                         (64, 0xFC0C0F16, 1, -1, -1))

    def test_error_strings(self):
        names = [self.lib.error_string(code) for code in range(fusedcomm.NUM_RESULTS)]
        self.assertEqual(len(set(names)), fusedcomm.NUM_RESULTS)
        self.assertTrue(all(names))
        self.assertTrue(self.lib.error_string(12345))  # unknown codes get a string too

    def test_unique_ids(self):
        a, b = self.lib.unique_id(), self.lib.unique_id()
        self.assertEqual(len(a.hex()), 2 * fusedcomm.UNIQUE_ID_BYTES)
        self.assertNotEqual(a.hex(), b.hex())
        self.assertEqual(fusedcomm.UniqueId.from_hex(a.hex()).hex(), a.hex())
        with self.assertRaises(ValueError):
            fusedcomm.UniqueId.from_hex("00ff")

    def test_bad_arguments_raise(self):
        with self.assertRaises(fusedcomm.FcError) as cm:
            fusedcomm.Communicator(self.lib, 0, self.lib.unique_id(), 0)
        self.assertEqual(cm.exception.code, fusedcomm.INVALID_ARGUMENT)
        self.assertIn("nranks", cm.exception.message)

    def test_init_without_gpu_or_one_rank(self):
        try:
            comm = fusedcomm.Communicator(self.lib, 1, self.lib.unique_id(), 0)
        except fusedcomm.FcError as e:
            # No GPU here: the documented code and a message that says why.
            self.assertEqual(e.code, fusedcomm.UNHANDLED_CUDA_ERROR, str(e))
            self.assertRegex(e.message.lower(), "driver|cuda device|gpu")
            return
        with comm:
            self.assertEqual(comm.count(), 1)
            self.assertEqual(comm.rank(), 0)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
