"""The shell scripts of the project (tools/, tests/, .ci/: every file with a sh or bash
shebang; the call scripts kept under docs/results are records, left as they ran) pass
ShellCheck at severity warning: a misspelt variable or an unquoted expansion in the GPU
runbook (tools/gpu-check) is otherwise found only on a GPU machine, in scarce device
time. Exit 77 (skip) without shellcheck."""
import os
import shutil
import subprocess
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
shellcheck = shutil.which("shellcheck")
if shellcheck is None:
    print("SKIP: shellcheck is not installed (tools/install-deps installs it)")
    sys.exit(77)

scripts = []
for top in ("tools", "tests", ".ci"):
    for d, dirs, files in os.walk(os.path.join(root, top)):
        dirs[:] = [x for x in dirs if x not in ("__pycache__", "data")]
        for f in files:
            path = os.path.join(d, f)
            try:
                with open(path, "rb") as fh:
                    first = fh.readline()
            except OSError:
                continue
            if first.startswith(b"#!") and (first.rstrip().endswith((b"/sh", b"/bash", b" bash", b" sh"))):
                scripts.append(path)
scripts.sort()
if len(scripts) < 10:  # the check itself: tools/ alone has more
    print("FAIL: found only %d shell scripts under %s" % (len(scripts), root))
    sys.exit(1)
r = subprocess.run([shellcheck, "-S", "warning", "-x"] + scripts, capture_output=True, text=True)
print(r.stdout + r.stderr)
print("%d shell scripts: %s" % (len(scripts), "clean" if r.returncode == 0 else "ShellCheck found problems"))
sys.exit(0 if r.returncode == 0 else 1)
