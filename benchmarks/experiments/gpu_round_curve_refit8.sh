#!/usr/bin/env bash
# GPU: the HCA h=64 s_q=1 b = 1..256 curve of the planner with the exact piece count and the re-chosen 64x64/64x32
# tile costs (the shape whose picks both moved).
#   BUDGET=150 bash benchmarks/experiments/gpu_round_curve_refit8.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-150}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 120 python3 -m wavemla.cli bench --mode hca --s-q 1 --heads 64 --batch $(seq 1 256) --reps 5 \
  --json "$OUT/curve_h64_hca_refit8.json" --label "${1:-unlabelled}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/curve_refit8.log"
grep -E "^== |ceilings" "$OUT/curve_refit8.log"; tail -3 "$OUT/curve_refit8.log" | cut -c1-150
