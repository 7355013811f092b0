#!/bin/bash
# Session 20, call F on 2 GPUs: the MMA form with the most warps per tile on ties (N = 5120,
# 7168): fcMatmulAllReduce's tests forced (mma) and auto, fc-bench mmar forced at the shapes.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/logs $OUT/csv
. .gpu/build.sh || exit 1
F=build-dev/tools/fcrun/fcrun B=build-dev/tools/fc-bench/fc-bench T=build-dev/tests/gpu/fc_gpu_tests
t() { local n=$1; shift; local t0=$SECONDS; "$@" > $OUT/logs/$n.log 2>&1; echo "$n rc=$? $((SECONDS-t0))s: $(grep -E 'passed|failed' $OUT/logs/$n.log | tail -2 | tr '\n' ' ' | cut -c1-200)"; }
p() { local n=$1; shift; local t0=$SECONDS; "$@" > $OUT/logs/$n.log 2>&1; echo "$n rc=$? $((SECONDS-t0))s"; grep -h '^\[rank 0\]' $OUT/logs/$n.log | sed 's/^\[rank 0\] //' | grep -v '^#' > $OUT/csv/$n.csv; }
t mmar-mma timeout 40 env FC_MMAR_ALGO=fused FC_GEMV_FORM=mma $F -n 2 --timeout 40 -- $T "fcMatmulAllReduce*"
t mmar-auto timeout 40 $F -n 2 --timeout 40 -- $T "fcMatmulAllReduce*"
S="4,5120,2560;16,5120,2560;4,7168,2048;16,7168,2048;4,6144,4096;16,4096,2048;16,8192,3584;4,4096,7168"
p bench timeout 60 env FC_MMAR_ALGO=fused FC_GEMV_FORM=mma $F -n 2 --timeout 60 -- $B mmar --shapes "$S" --norm 0 --eager 0
cd $OUT && tar czf logs.tgz logs && rm -rf logs && tar czf csv.tgz csv && rm -rf csv
