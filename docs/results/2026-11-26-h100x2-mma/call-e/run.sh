#!/bin/bash
# Session 20, call E on 2 GPUs: the residual + RMSNorm kernel behind the decode kernel
# prefetches its residual and weight lines before griddepcontrol.wait: the norm tests, the
# PDL neighbour test, fc-bench mmar (norm form) at decode rows.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/logs $OUT/csv
. .gpu/build.sh || exit 1
F=build-dev/tools/fcrun/fcrun B=build-dev/tools/fc-bench/fc-bench T=build-dev/tests/gpu/fc_gpu_tests
t() { local n=$1; shift; local t0=$SECONDS; "$@" > $OUT/logs/$n.log 2>&1; echo "$n rc=$? $((SECONDS-t0))s: $(grep -E 'passed|failed' $OUT/logs/$n.log | tail -2 | tr '\n' ' ' | cut -c1-200)"; }
p() { local n=$1; shift; local t0=$SECONDS; "$@" > $OUT/logs/$n.log 2>&1; echo "$n rc=$? $((SECONDS-t0))s"; grep -h '^\[rank 0\]' $OUT/logs/$n.log | sed 's/^\[rank 0\] //' | grep -v '^#' > $OUT/csv/$n.csv; }
t tests timeout 60 $F -n 2 --timeout 60 -- $T "fcMatmulAllReduce*,fcAllReduceResidualRMSNorm*,PDL neighbours*"
t tests-4shared timeout 60 env FC_SHARE_GPU=1 $F -n 4 --timeout 60 -- $T "fcMatmulAllReduce*"
p mmar-norm timeout 60 $F -n 2 --timeout 60 -- $B mmar --tokens 1,2,4,8,16 --norm 1 --eager 0
p mmar-norm-2 timeout 60 $F -n 2 --timeout 60 -- $B mmar --tokens 1,4,16 --norm both --eager 0 -r 40
cd $OUT && tar czf logs.tgz logs && rm -rf logs && tar czf csv.tgz csv && rm -rf csv
