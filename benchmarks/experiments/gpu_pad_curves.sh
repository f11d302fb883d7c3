#!/usr/bin/env bash
# The sparse decode's CSA and HCA h=64 s_q=1 curves (b = 1..256, median of 5, the planner's plans: padded tokens at
# small batches) and the batch-invariant cost against those default plans, on one GPU in one call. Output under $OUT:
# pad_curves.log, curve_{csa,hca}_h64_s1.json, bi_cost.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_pad_curves.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
SHA=${1:-}
{
  machine "$SHA"
  curve 170 csa 64 1
  curve 170 hca 64 1
  step 150 python3 benchmarks/bi_cost.py --reps 10 --batch 32 64 96 128 133 148 200 256 --json "$OUT/bi_cost.json"
} 2>&1 | quiet > "$OUT/pad_curves.log"
python3 benchmarks/experiments/curve_steps.py "$OUT"/curve_*.json
tail -12 "$OUT/pad_curves.log"
