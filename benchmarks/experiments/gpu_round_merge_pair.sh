#!/usr/bin/env bash
# GPU: the merge of a token cut into two pieces by _merge_two_out (launcher option merge_pair, on by default in this
# build) and segments normalized by one product per element (lean_norm, on), each A/B against it off (launch_ab.py:
# same plan and inputs; both change the output by an fp32 unit or two before the cast, so the bits may differ),
# then the batch-invariant cost at median of 30 and the GPU tests of the sparse decode and of batch invariance.
#   BUDGET=480 bash benchmarks/experiments/gpu_round_merge_pair.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-480}
. "$(dirname "$0")/../budget.sh"
PM=${POINTS_MERGE:-"csa:128:1:64:2 csa:256:1:64:2 hca:32:1:64:2 hca:128:1:64:2 csa:133:1:64 hca:133:1:64 \
csa:148:1:64 csa:128:1:64 csa:96:2:64 csa:96:1:128"}
PN=${POINTS_NORM:-"csa:128:1:64 csa:32:1:64 csa:128:1:64:2 hca:64:1:64 csa:64:1:16 csa:96:1:128"}
{
machine "${1:-}"
step 130 python3 benchmarks/experiments/launch_ab.py "$OUT/merge_pair_ab.json" --kw merge_pair=0 --points $PM
step 90 python3 benchmarks/experiments/launch_ab.py "$OUT/lean_norm_ab.json" --kw lean_norm=0 --points $PN
step 70 python3 benchmarks/bi_cost.py --batch 32 64 128 256 --reps 30 --json "$OUT/bi_cost.json"
step 150 python3 -m pytest -m gpu tests/kernels/test_sparse_decode.py tests/kernels/test_batch_invariance.py \
  tests/kernels/test_determinism.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider --tb=short
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/merge_pair.log"
grep -E "^== |bits|passed|failed|^E |^csa|^hca|^mode|Error" "$OUT/merge_pair.log" | cut -c1-190
