#!/usr/bin/env bash
# The second call on 2 GPUs: NEXT.md's items 3 and 5 - issue 44's short decode grid (fc-bench
# and PyTorch beside FlashInfer, with push-rate's bound) and issue 43's model benchmark
# (Llama-3-8B at 2 ranks; FC_MODEL_70B=0 keeps it to one call). Carry and usage as 2gpu-A.sh.
set -u
export FC_COMMIT=${1:?commit} FC_SITE=/tmp/site FC_GRID=short FC_MODEL_70B=0
tar xJf .gpu/rb.txz && tar xJf .gpu/anchors.txz || { echo "unpack failed"; exit 1; }
# shellcheck source=docs/results/next/part.sh
. docs/results/next/part.sh
part grid2 330 grid
part model2 240 model
cd "$OUT" && rm -rf ./*/site && tar czf all.tgz ./*2 ./*.log && rm -rf ./*2 ./*.log
