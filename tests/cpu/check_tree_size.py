"""What a device call sends stays small enough to carry what the GPU runbook needs.

The device tool copies the checkout (tracked files and untracked ones git does not ignore)
plus the carried paths to the GPU machine, 64 MiB in all. docs/results/NEXT.md's calls carry
a fresh-clone build (fc-bench, the library, the GPU suite, fcrun: ~8-11 MiB as .txz) and,
for the runs beside FlashInfer, its prepared tree with the AOT module (.anchors packed:
see CARRY_MIB). Results accumulate in docs/results with every run: past TREE_LIMIT_MIB
the next session's 2-GPU calls cannot take both, so this fails first, here, and the
largest files are listed (keep large raw files gzipped; tools/report reads .gz).
Exit 77 (skip) outside a git checkout (a source tarball has no results to grow)."""
import os
import subprocess
import sys

MIB = 1 << 20
DEVICE_LIMIT_MIB = 64
# A build packed by tools/gpu-build --carry (~11 MiB with a probe build's fc-bench) and
# FlashInfer's prepared tree with its AOT module, tar + xz -9e (10.2 MiB, 2026-12-05).
CARRY_MIB = 24
TREE_LIMIT_MIB = DEVICE_LIMIT_MIB - CARRY_MIB

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
r = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                   capture_output=True)
if r.returncode != 0:
    print("SKIP: %s is not a git checkout (%s)" % (root, r.stderr.decode().strip()))
    sys.exit(77)
sizes = []
for name in r.stdout.decode().split("\0"):
    path = os.path.join(root, name)
    if name and os.path.isfile(path) and not os.path.islink(path):
        sizes.append((os.path.getsize(path), name))
total = sum(s for s, _ in sizes)
if len(sizes) < 100:  # the check itself: the project has hundreds of files
    print("FAIL: git listed only %d files under %s" % (len(sizes), root))
    sys.exit(1)
print("%d files, %.1f MiB (limit %d MiB: the device tool's %d less %d for the carried build and FlashInfer)"
      % (len(sizes), total / MIB, TREE_LIMIT_MIB, DEVICE_LIMIT_MIB, CARRY_MIB))
if total > TREE_LIMIT_MIB * MIB:
    print("FAIL: the tree is too large to travel with the runbook's carries; the largest files:")
    for s, name in sorted(sizes, reverse=True)[:15]:
        print("  %8.2f MiB  %s" % (s / MIB, name))
    sys.exit(1)
