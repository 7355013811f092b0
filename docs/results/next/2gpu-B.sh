#!/usr/bin/env bash
# The second call on 2 GPUs: NEXT.md's items 3 and 5 - issue 44's short decode grid (fc-bench
# and PyTorch beside FlashInfer, with push-rate's bound) and issue 43's model benchmark
# (Llama-3-8B at 2 ranks; FC_MODEL_70B=0 keeps it to one call). Carry and usage as 2gpu-A.sh.
set -u
export FC_COMMIT=${1:?commit} FC_SITE=/tmp/site FC_GRID=short FC_MODEL_70B=0
tar xJf .gpu/rb.txz && tar xJf .gpu/anchors.txz || { echo "unpack failed"; exit 1; }
t0=$SECONDS
part() {
  local left=$((570 - (SECONDS - t0)))
  [ "$left" -lt 30 ] && { echo "$1 skipped: $left s left"; return; }
  [ "$2" -lt "$left" ] && left=$2
  timeout "$left" tools/gpu-check build-rb "$OUT/$1" "$3" >"$OUT/$1.log" 2>&1
  echo "$1 rc=$? $((SECONDS - t0)) s"; tail -n 30 "$OUT/$1/logs/summary.txt" 2>/dev/null
}
part grid2 330 grid
part model2 240 model
cd "$OUT" && rm -rf ./*/site && tar czf all.tgz ./*2 ./*.log && rm -rf ./*2 ./*.log
