#!/bin/bash
# Session 20, call B on 2 GPUs: fcMatmulAllReduce's one kernel with tensor cores (the MMA
# form, 2-16 rows) and the norm inside it (grid barrier): its tests (auto; forced with
# FC_MMAR_ALGO=fused, FC_GEMV_FORM mma / fma) at 2 ranks and at 4 sharing the GPUs, the
# fault scenarios, then fc-bench mmar at 1-16 rows, both forms; memcheck on the forced tests.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/logs $OUT/csv
. .gpu/build.sh || exit 1
F=build-dev/tools/fcrun/fcrun B=build-dev/tools/fc-bench/fc-bench T=build-dev/tests/gpu/fc_gpu_tests
t() { local n=$1; shift; local t0=$SECONDS; "$@" > $OUT/logs/$n.log 2>&1; echo "$n rc=$? $((SECONDS-t0))s: $(grep -E 'passed|failed' $OUT/logs/$n.log | tail -2 | tr '\n' ' ' | cut -c1-200)"; }
p() { local n=$1; shift; local t0=$SECONDS; "$@" > $OUT/logs/$n.log 2>&1; echo "$n rc=$? $((SECONDS-t0))s"; grep -h '^\[rank 0\]' $OUT/logs/$n.log | sed 's/^\[rank 0\] //' | grep -v '^#' > $OUT/csv/$n.csv; }
t mmar-auto timeout 100 $F -n 2 --timeout 100 -- $T "fcMatmulAllReduce*"
t mmar-fused timeout 100 env FC_MMAR_ALGO=fused $F -n 2 --timeout 100 -- $T "fcMatmulAllReduce*"
t mmar-fused-mma timeout 100 env FC_MMAR_ALGO=fused FC_GEMV_FORM=mma $F -n 2 --timeout 100 -- $T "fcMatmulAllReduce*"
t mmar-fused-fma timeout 100 env FC_MMAR_ALGO=fused FC_GEMV_FORM=fma $F -n 2 --timeout 100 -- $T "fcMatmulAllReduce*"
t mmar-fused-4shared timeout 150 env FC_SHARE_GPU=1 FC_MMAR_ALGO=fused $F -n 4 --timeout 150 -- $T "fcMatmulAllReduce*"
S="1,4096,2048;2,4096,2048;4,4096,2048;8,4096,2048;16,4096,2048;1,4096,7168;4,4096,7168;16,4096,7168;1,5120,2560;4,5120,2560;12,5120,2560;16,5120,2560;4,5120,13824;16,5120,13824"
p bench-mma timeout 120 env FC_MMAR_ALGO=fused FC_GEMV_FORM=mma $F -n 2 --timeout 120 -- $B mmar --shapes "$S" --eager 0
p bench-fma timeout 100 env FC_MMAR_ALGO=fused FC_GEMV_FORM=fma $F -n 2 --timeout 100 -- $B mmar --shapes "1,4096,2048;2,4096,2048;4,4096,2048;1,4096,7168;4,4096,7168;1,5120,2560;4,5120,2560" --eager 0
t faults timeout 90 tests/gpu/run-fault-tests build-dev 2
t sanitize-mma timeout 80 env FC_MMAR_ALGO=fused $F -n 2 --timeout 80 -- compute-sanitizer --tool memcheck --error-exitcode 1 $T "fcMatmulAllReduce: exact*"
cd $OUT && tar czf logs.tgz logs && rm -rf logs && tar czf csv.tgz csv && rm -rf csv
