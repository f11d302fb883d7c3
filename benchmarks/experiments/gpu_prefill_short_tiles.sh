#!/usr/bin/env bash
# The sparse prefill's tile choice at short and mid-size calls: every tile that fits (whole lists) against the
# planner's plan (16-head blocks below one program per SM, pieces below half the slots).
# Output under $OUT: short-tiles.log, short-tiles.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_prefill_short_tiles.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-300}
source benchmarks/budget.sh
SHA=${1:-unknown}
{
  machine "$SHA"
  step 240 python3 -m wavemla.tools.bench_prefill --json "$OUT/short-tiles.json" --label "$SHA" --reps 15 --tiles \
    --no-baseline --cases dsv4-h64-s16 dsv4-h64-s100 dsv4-h16-s64 v32-h16-s32
} 2>&1 | tee "$OUT/short-tiles.log"
echo "== table"
grep -E "wavemla|ceilings" "$OUT/short-tiles.log" | tail -30
