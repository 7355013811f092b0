"""python -m fusedcomm [--version | info]: the package's and the library's version,
where the library was loaded from, and the CUDA devices the driver sees."""
import argparse
import ctypes
import sys

from . import __version__, find_library, library


def _devices():
    """(name, ...) of the driver's devices, or the reason there are none."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return None, "no CUDA driver (libcuda.so.1: %s)" % e
    if cuda.cuInit(0) != 0:
        return None, "the CUDA driver did not initialise (cuInit failed)"
    count = ctypes.c_int()
    cuda.cuDeviceGetCount(ctypes.byref(count))
    names = []
    for i in range(count.value):
        dev, name = ctypes.c_int(), ctypes.create_string_buffer(256)
        cuda.cuDeviceGet(ctypes.byref(dev), i)
        cuda.cuDeviceGetName(name, 256, dev)
        names.append(name.value.decode())
    return names, None


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fusedcomm")
    ap.add_argument("--version", action="store_true", help="print the versions and exit")
    ap.add_argument("command", nargs="?", choices=["info"], help="info: versions, library path, devices")
    args = ap.parse_args(argv)
    lib = library()
    v = lib.version()
    print("fusedcomm %s, libfusedcomm %d.%d.%d (%s)" % (__version__, v // 10000, v // 100 % 100, v % 100, lib.path))
    if args.version:
        return 0
    if args.command == "info" or args.command is None:
        print("library search: FC_LIBRARY, the bundled copy, the system's -> %s" % find_library())
        names, why = _devices()
        if names is None:
            print("devices: none: %s" % why)
        else:
            for i, name in enumerate(names):
                print("device %d: %s" % (i, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
