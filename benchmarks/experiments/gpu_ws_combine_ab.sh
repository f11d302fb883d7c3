#!/usr/bin/env bash
# GPU: the shipped planner's pick against the pick of a candidate warp-specialized cost model (the combine priced by
# the cut tokens' fp16 partial bytes, re-fitted: docs/planner.md, "The warp-specialized kernel's costs") at a sample
# of the batches where they differ, each pair checked against the fp64 reference and timed (CUDA graph, L2 flushed,
# median of 10). Points (MODE:B:TILE:UPP): ws_combine_ab_points.txt.
#   BUDGET=240 bash benchmarks/experiments/gpu_ws_combine_ab.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-240}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 220 python3 benchmarks/experiments/partition_sweep.py --reps 10 \
  --points $(cat "$(dirname "$0")/ws_combine_ab_points.txt") --json "$OUT/ws_combine_ab.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_combine_ab.log"
echo "points: $(grep -c ' us ' "$OUT/ws_combine_ab.log")  errors: $(grep -c ERROR "$OUT/ws_combine_ab.log")  mismatches: $(grep -c MISMATCH "$OUT/ws_combine_ab.log")"
