#!/usr/bin/env bash
# GPU: the in-kernel merge as one pipelined (chunk, piece) loop (MERGE_STAGES): kernel tests, the merge timed alone
# (merge_micro.py), and in the split kernel against the nested loops (launch_ab.py --kw merge_stages=0) and against
# three stages (--kw merge_stages=3), same bits each. The launch_ab steps need the build of commit 3852f07 (the
# option merge_stages; reverted in a4dfe10): `git checkout 3852f07 -- src` first.
#   BUDGET=520 bash benchmarks/experiments/gpu_round_merge_flat.sh   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-520}
. "$(dirname "$0")/../budget.sh"
P="csa:128:1:64:2 csa:256:1:64:2 hca:32:1:64:2 hca:128:1:64:2 csa:133:1:64 hca:133:1:64 csa:148:1:64 csa:256:1:64 \
csa:128:1:64 csa:64:1:64 hca:64:1:64 csa:96:2:64 csa:96:1:128"
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step 150 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_batch_invariance.py \
  tests/kernels/test_determinism.py -q $X -p no:cacheprovider --tb=short
step 100 python3 benchmarks/experiments/merge_micro.py "$OUT/merge_micro_flat.json"
step 130 python3 benchmarks/experiments/launch_ab.py "$OUT/merge_flat_ab0.json" --kw merge_stages=0 --points $P
step 100 python3 benchmarks/experiments/launch_ab.py "$OUT/merge_flat_ab3.json" --kw merge_stages=3 --points $P
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/merge_flat.log"
grep -E "^== |passed|failed|bits|^E |merge|b=" "$OUT/merge_flat.log" | cut -c1-200
