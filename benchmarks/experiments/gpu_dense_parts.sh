#!/usr/bin/env bash
# GPU: the dense FP8 16-head plans in one and two programs an SM (WAVEMLA_TARGET_CTAS=132 and 264: parts of the
# staged 16x32x4x3 tile) against the planner's pick, uniform and skewed lengths, b = 4..64 at s_k 4K and 16K: the
# planner prices the combine for lengths at the block table's capacity, and with skewed lengths the long request holds
# most of the pieces (b = 8, 16K: 45.6 µs in 264 parts, combine 28.1; 35.5 in 132, combine 16.5); then the combine
# alone over its launch shapes on those skewed cuts (dense_combine_shapes.py --skewed).
#   BUDGET=360 bash benchmarks/experiments/gpu_dense_parts.sh SHA   (writes dense-parts-{plan,132,264}.json,
#   dense-combine-skewed.json and dense_parts.log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-360}
. "$(dirname "$0")/../budget.sh"
D="python3 -m wavemla.cli bench --dense --batch 4 8 16 32 64 --seqlen 4096 16384 --heads 16 --kv-formats fp8
  --lengths uniform skewed --reps 15 --label ${1:-}"
{
machine "${1:-}"
step 80 $D --json "$OUT/dense-parts-plan.json"
WAVEMLA_TARGET_CTAS=132 step 80 $D --json "$OUT/dense-parts-132.json"
WAVEMLA_TARGET_CTAS=264 step 80 $D --json "$OUT/dense-parts-264.json"
step 110 python3 benchmarks/experiments/dense_combine_shapes.py "$OUT/dense-combine-skewed.json" --skewed
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/dense_parts.log"
grep -E "^== |ceilings|^dense|^b=" "$OUT/dense_parts.log" | cut -c1-150
