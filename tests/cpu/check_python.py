"""The project's Python (the package, tools/ - bench-model, report, launch-ranks, the
PyTorch benchmarks, the probes - and the tests) passes pyflakes: an undefined name or a
misspelt attribute of a module in a path that runs only on GPUs (the benchmarks' torch
columns, FlashInfer's variant) is otherwise found only on a GPU machine, in scarce device
time. The package's re-exports (`from ._core import ...` in an __init__.py) are the one
report left out. Exit 77 (skip) without pyflakes."""
import os
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
try:
    from pyflakes import api, messages
    from pyflakes.reporter import Reporter
except ImportError:
    print("SKIP: pyflakes is not installed for %s (tools/install-deps installs it)" % sys.executable)
    sys.exit(77)


def python_files():
    for top in ("python", "tools", "tests"):
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if x not in ("__pycache__", "data", "build")]
            for f in files:
                path = os.path.join(d, f)
                if f.endswith(".py"):
                    yield path
                elif "." not in f:  # scripts without a suffix: by their shebang
                    with open(path, "rb") as fh:
                        first = fh.readline()
                    if first.startswith(b"#!") and b"python" in first:
                        yield path


class Collect(Reporter):
    def __init__(self):
        super().__init__(sys.stdout, sys.stderr)
        self.found = []

    def flake(self, message):
        reexport = isinstance(message, messages.UnusedImport) and os.path.basename(message.filename) == "__init__.py"
        if not reexport:
            self.found.append(str(message))

    def syntaxError(self, filename, msg, lineno, offset, text):
        self.found.append("%s:%s: syntax error: %s" % (filename, lineno, msg))

    def unexpectedError(self, filename, msg):
        self.found.append("%s: %s" % (filename, msg))


files = sorted(set(python_files()))
if len(files) < 20:  # the check itself: tools/ and tests/ alone have more
    print("FAIL: found only %d Python files under %s" % (len(files), root))
    sys.exit(1)
rep = Collect()
for path in files:
    with open(path, encoding="utf-8") as fh:
        api.check(fh.read(), path, rep)
print("\n".join(rep.found))
print("%d Python files: %s" % (len(files), "clean" if not rep.found else "%d reports" % len(rep.found)))
sys.exit(1 if rep.found else 0)
