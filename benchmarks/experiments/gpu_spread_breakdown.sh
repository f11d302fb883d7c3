#!/usr/bin/env bash
# GPU: where the spread partition's time goes as the leftover tokens grow (CSA h=64 b = 133..148: L = 1..16; HCA
# b = 133, 140): ws_spread.py --breakdown times each run with and without the combine launched, and the planner's
# plan again after the variants (at b = 140, L = 8, the spread took 84.7 µs against 72.2 at b = 133 with the same
# busiest program, and the variant on the planner's partition 0.97-0.995 of the package's kernel, run second).
#   BUDGET=300 bash benchmarks/experiments/gpu_spread_breakdown.sh SHA   (writes ws_spread_breakdown.{json,log})
set -uo pipefail
BUDGET=${BUDGET:-300}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 290 python3 benchmarks/experiments/ws_spread.py --reps 15 --breakdown --json "$OUT/ws_spread_breakdown.json" \
  --points csa:133 csa:134 csa:135 csa:136 csa:138 csa:140 csa:144 csa:148 hca:133 hca:140
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_spread_breakdown.log"
grep -E "^== | us | ERROR" "$OUT/ws_spread_breakdown.log" | cut -c1-150
