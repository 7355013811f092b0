#!/usr/bin/env bash
# The third call on 2 GPUs: NEXT.md's item 6 - the GPU suite, every forced path and the
# fault scenarios: first the GPU suite at 4 ranks sharing the 2 GPUs (FC_SHARE_GPU=1), then
# tools/gpu-check tests (2 ranks; its faults also at 4 shared) while the call lasts.
# Carry [".gpu/rb.txz"]; usage as 2gpu-A.sh.
set -u
export FC_COMMIT=${1:?commit}
tar xJf .gpu/rb.txz || { echo "unpack failed"; exit 1; }
mkdir -p "$OUT/tests4"
FC_SHARE_GPU=1 timeout 200 build-rb/tools/fcrun/fcrun -n 4 --timeout 190 -- build-rb/tests/gpu/fc_gpu_tests \
  >"$OUT/tests4/suite-4-shared.log" 2>&1
echo "suite at 4 ranks sharing 2 GPUs rc=$?"; tail -n 3 "$OUT/tests4/suite-4-shared.log"
timeout 370 tools/gpu-check build-rb "$OUT/tests2" tests >"$OUT/tests2.log" 2>&1
echo "tests rc=$?"; cat "$OUT/tests2/logs/summary.txt" 2>/dev/null
cd "$OUT" && tar czf all.tgz tests4 tests2 tests2.log && rm -rf tests4 tests2 tests2.log
