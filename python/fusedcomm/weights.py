"""The benchmarks' weights hot or cold (--cold-weight), without importing torch: the
ring works on anything with numel(), element_size() and clone(), so that its CPU test
runs where torch is not installed."""
import itertools


def weight_ring(w, cold, l2_bytes=None):
    """The weight of each next call: w itself, or with cold copies of w taken in turn,
    together at least twice the L2 (l2_bytes; None: the device's), so that every call
    reads its weight from HBM as a model's decode step does - each layer's weight long
    evicted since the step before. A graph's back-to-back calls of one weight find it in
    L2 wherever it fits (~50 MiB on an H200). Every copy holds w's values, so checks
    against w stay valid. As fc-bench mmar --cold-weight."""
    if not cold:
        return lambda: w
    if l2_bytes is None:
        import torch
        l2_bytes = getattr(torch.cuda.get_device_properties(w.device), "L2_cache_size", 64 << 20)
    nbytes = max(1, w.numel() * w.element_size())
    copies = [w] + [w.clone() for _ in range(max(2, -(-2 * l2_bytes // nbytes)) - 1)]
    return itertools.cycle(copies).__next__
