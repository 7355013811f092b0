"""fusedcomm.weights.weight_ring (the PyTorch benchmarks' --cold-weight), without a GPU:
hot is the weight itself every call; cold hands out copies in turn, enough that they span
twice the given L2 (at least two), each with the weight's values in storage of its own,
and comes back round to each copy. Runs on a stand-in tensor (numel, element_size,
clone: all the ring uses), and again on a torch CPU tensor where torch is installed."""
import os
import sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(root, "python"))
from fusedcomm.weights import weight_ring  # noqa: E402


class StandIn:
    """A tensor of n elements of `size` bytes: values a tuple, storage its identity."""

    def __init__(self, values, size):
        self.values, self.size = tuple(values), size

    def numel(self):
        return len(self.values)

    def element_size(self):
        return self.size

    def clone(self):
        return StandIn(self.values, self.size)


def check(w, same, storage, failures, what):
    hot = weight_ring(w, False)
    if not all(hot() is w for _ in range(3)):
        failures.append("%s, hot: not the weight itself on every call" % what)
    # 2 x 1000 bytes of L2 over 120-byte copies: 17 copies (w and 16 clones).
    cold = weight_ring(w, True, l2_bytes=1000)
    seen = [cold() for _ in range(34)]
    ids = [storage(t) for t in seen]
    if len(set(ids)) != 17:
        failures.append("%s, cold: %d distinct copies, expected 17" % (what, len(set(ids))))
    if any(a == b for a, b in zip(ids, ids[1:])):
        failures.append("%s, cold: one copy twice in a row" % what)
    if ids[:17] != ids[17:]:
        failures.append("%s, cold: the copies not taken in a fixed turn" % what)
    if storage(w) not in ids or not all(same(t, w) for t in seen):
        failures.append("%s, cold: a copy without the weight's values, or the weight itself left out" % what)
    # A weight larger than the L2: still two copies, so consecutive calls differ.
    two = weight_ring(w, True, l2_bytes=10)
    if storage(two()) == storage(two()):
        failures.append("%s, cold, weight beyond the L2: consecutive calls read one copy" % what)


failures = []
check(StandIn(range(60), 2), lambda a, b: a.values == b.values, id, failures, "stand-in")
ran = ["a stand-in tensor"]
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    w = torch.arange(60, dtype=torch.bfloat16).reshape(6, 10)  # 120 bytes
    check(w, torch.equal, lambda t: t.data_ptr(), failures, "torch")
    ran.append("a torch CPU tensor")
print("\n".join(failures) or "weight ring: hot, cold (17 copies in turn), beyond the L2 (2), on %s" % " and ".join(ran))
sys.exit(1 if failures else 0)
