#!/usr/bin/env bash
# GPU: the warp-specialized kernel's spread partition past a perfect fit (ws_spread.py: whole tokens first, the
# leftover tokens cut into runs spread over the programs), against the planner's plan and the variant kernel on the
# planner's partition (median of 15, each checked against the fp64 reference); then gpu_shared_tile.sh with the
# budget left (the 16x32 shared-SM pricing A/B, the staged tiles' checks).
#   BUDGET=600 bash benchmarks/experiments/gpu_spread.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-600}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 260 python3 benchmarks/experiments/ws_spread.py --reps 15 --json "$OUT/ws_spread.json" --points csa:133 \
  csa:140 csa:148 csa:160 csa:200 hca:133 hca:148 csa-s2:67 hca-s2:67 csa-h128:67 hca-h128:67
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_spread.log"
grep -E "^== | us | ERROR" "$OUT/ws_spread.log" | cut -c1-150
BUDGET=$((END - SECONDS)) bash "$(dirname "$0")/gpu_shared_tile.sh" "${1:-}"
