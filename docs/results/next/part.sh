# shellcheck shell=bash
# Sourced by 2gpu-A.sh and 2gpu-B.sh: part NAME SECONDS GPU_CHECK_PART runs one part of
# tools/gpu-check on the packed build into OUT/NAME, within SECONDS and within 570 s of
# the call's start (t0), and prints its summary.
t0=$SECONDS
part() {
  local left=$((570 - (SECONDS - t0)))
  [ "$left" -lt 30 ] && { echo "$1 skipped: $left s left"; return; }
  [ "$2" -lt "$left" ] && left=$2
  timeout "$left" tools/gpu-check build-rb "$OUT/$1" "$3" >"$OUT/$1.log" 2>&1
  echo "$1 rc=$? $((SECONDS - t0)) s"; tail -n 30 "$OUT/$1/logs/summary.txt" 2>/dev/null
}
