"""fusedcomm.bench's weight ring (the PyTorch benchmarks' --cold-weight) on CPU tensors:
hot is the weight itself every call; cold hands out copies in turn, enough that they
span twice the given L2 (at least two), each with the weight's values in storage of its
own, and comes back round to each copy. Exit 77 (skip) without torch."""
import os
import sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(root, "python"))
try:
    import torch
except ImportError:
    print("SKIP: torch is not installed for %s (fusedcomm.bench needs it)" % sys.executable)
    sys.exit(77)
from fusedcomm.bench import weight_ring  # noqa: E402

failures = []
w = torch.arange(6 * 10, dtype=torch.bfloat16).reshape(6, 10)  # 120 bytes
hot = weight_ring(w, False)
if not all(hot() is w for _ in range(3)):
    failures.append("hot: not the weight itself on every call")
# 2 x 1000 bytes of L2 over 120-byte copies: 17 copies (w and 16 clones).
cold = weight_ring(w, True, l2_bytes=1000)
seen = [cold() for _ in range(34)]
ids = {t.data_ptr() for t in seen}
if len(ids) != 17:
    failures.append("cold: %d distinct copies, expected 17" % len(ids))
if any(a.data_ptr() == b.data_ptr() for a, b in zip(seen, seen[1:])):
    failures.append("cold: one copy twice in a row")
if [t.data_ptr() for t in seen[:17]] != [t.data_ptr() for t in seen[17:]]:
    failures.append("cold: the copies not taken in a fixed turn")
if w.data_ptr() not in ids or not all(torch.equal(t, w) for t in seen):
    failures.append("cold: a copy without the weight's values, or the weight itself left out")
# A weight larger than the L2: still two copies, so consecutive calls differ.
two = weight_ring(w, True, l2_bytes=10)
if two().data_ptr() == two().data_ptr():
    failures.append("cold, weight beyond the L2: consecutive calls read one copy")
print("\n".join(failures) or "weight ring: hot, cold (17 copies in turn), beyond the L2 (2)")
sys.exit(1 if failures else 0)
