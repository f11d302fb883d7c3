#!/usr/bin/env bash
# The spread partition (whole tokens first, the leftover spread) past a perfect fit by 3 to 8 leftover query tokens,
# where the model prices it cheaper than the uniform partition once offered that far (spread_ab.py --max-left 8),
# against the uniform plan and the batch before; then the s_q=2 and h=128 curves (CSA and HCA, b = 1..256, median of
# 5) of the planner's plans. Output under $OUT: spread_left.log, spread_left.json, curve_*.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_spread_left.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
SHA=${1:-}
POINTS="csa:135 csa:136 csa-s2:68 csa-s2:134 csa-h128:69 csa-h128:73 csa-h128:135 hca:135 hca-s2:134 hca-h128:69
  hca-h128:74"
{
  machine "$SHA"
  # shellcheck disable=SC2086
  step 150 python3 benchmarks/experiments/spread_ab.py "$OUT/spread_left.json" --points $POINTS --max-left 8 \
    --rounds 3 --reps 10
  curve 120 csa 64 2
  curve 120 hca 64 2
  curve 120 csa 128 1
  curve 120 hca 128 1
} 2>&1 | quiet > "$OUT/spread_left.log"
grep -E "spread/uniform" "$OUT/spread_left.log"
python3 benchmarks/experiments/curve_steps.py "$OUT"/curve_*.json
grep "^== " "$OUT/spread_left.log" | grep -v "^== exit 0"
