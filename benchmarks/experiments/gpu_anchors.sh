#!/usr/bin/env bash
# The current build's 64-head anchor table (`wavemla bench --reps 15`; FlashMLA's anchors and ratios show only on
# an H200) and its batch-invariant cost (bi_cost.py), in one short call. Output under $OUT: anchors.log, bench.json,
# bi_cost.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_anchors.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-150}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  step 70 python3 -m wavemla.cli bench --reps 15 --json "$OUT/bench.json" --label "${1:-unknown}"
  step 70 python3 benchmarks/bi_cost.py --batch 32 64 96 128 133 148 200 256 --reps 10 --json "$OUT/bi_cost.json"
} 2>&1 | quiet | tee "$OUT/anchors.log" | tail -45
