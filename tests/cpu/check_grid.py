"""The decode grid (issue 44) is defined twice, for fc-bench in C++
(tools/common/decode_grid.h) and for the PyTorch benchmarks in Python
(python/fusedcomm/bench.py, DECODE_GRIDS): fail when the two name different grids or
lists, so that the C and the PyTorch runs time the same cells. Reads both as text (no
torch, no build needed)."""
import ast
import os
import re
import sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
header = open(os.path.join(root, "tools", "common", "decode_grid.h")).read()
# {"name", "hidden", "tokens"} rows of kFcDecodeGrids; adjacent string literals joined.
body = header.split("kFcDecodeGrids[] = {", 1)[1].split("};", 1)[0]
cxx = {}
for row in re.findall(r"\{((?:\s*\"[^\"]*\"\s*,?)+)\}", body):
    name, hidden, tokens = re.findall(r"\"([^\"]*)\"", row)
    cxx[name] = {"hidden": hidden, "tokens": tokens}

tree = ast.parse(open(os.path.join(root, "python", "fusedcomm", "bench.py")).read())
py = next(ast.literal_eval(node.value) for node in tree.body
          if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "DECODE_GRIDS" for t in node.targets))

failures = []
if set(cxx) != set(py):
    failures.append("grid names: decode_grid.h %s, bench.py %s" % (sorted(cxx), sorted(py)))
for name in sorted(set(cxx) & set(py)):
    for key in ("hidden", "tokens"):
        if cxx[name][key] != py[name][key]:
            failures.append("%s %s: decode_grid.h %s, bench.py %s" % (name, key, cxx[name][key], py[name][key]))
    tokens = [int(t) for t in py[name]["tokens"].split(",")]
    if tokens != sorted(set(tokens)) or not any(t & (t - 1) for t in tokens):
        failures.append("%s tokens: not increasing, or no count that is not a power of two" % name)
print("\n".join(failures) or "decode grids agree: %s" % ", ".join(
    "%s %d x %d" % (n, len(py[n]["hidden"].split(",")), len(py[n]["tokens"].split(","))) for n in sorted(py)))
sys.exit(1 if failures else 0)
