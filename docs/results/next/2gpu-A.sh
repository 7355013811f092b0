#!/usr/bin/env bash
# The first call on 2 GPUs (nvidia-h200-x2) after the sixty-seventh session: NEXT.md's items
# 1, 2 and 4 - issue 42's mmar part, the peers from PyTorch beside FlashInfer, issue 45's
# sp part (~2 + ~3 + ~2.5 min; the FlashInfer AOT module skips its ~4-min JIT).
# Carry [".gpu/rb.txz", ".gpu/anchors.txz"] (rb: 32e912c's fresh-clone CI probe build,
# build-rb/, the library's code unchanged since 03d29f2; anchors: FlashInfer 0.7.2.post1
# prepared with its AOT module: NEXT.md). Packing rb.txz from a fresh-clone CI tree T (a probe
# build): copy, keeping the paths, T/build's src/libfusedcomm.so*, tests/gpu/fc_gpu_tests and
# fc_fault_tests, tools/fcrun/fcrun, tools/fc-bench/fc-bench, tools/probes/{decode-gemm,
# pdl-edge,push-rate,launch-gap,initcheck-gemm} and meson-info/intro-buildoptions.json into
# build-rb/, strip --strip-unneeded the binaries, `tar cf - build-rb | xz -9e > .gpu/rb.txz`.
# Usage: bash docs/results/next/2gpu-A.sh COMMIT
# (the commit whose scripts run, for the manifests: the tree's HEAD).
set -u
export FC_COMMIT=${1:?commit} FC_SITE=/tmp/site
tar xJf .gpu/rb.txz && tar xJf .gpu/anchors.txz || { echo "unpack failed"; exit 1; }
# shellcheck source=docs/results/next/part.sh
. docs/results/next/part.sh
part mmar2 200 mmar
part peers2 220 peers
part sp2 200 sp
cd "$OUT" && rm -rf ./*/site && tar czf all.tgz ./*2 ./*.log && rm -rf ./*2 ./*.log
