#!/usr/bin/env bash
# The spread partition with its combine priced by bytes and a launch (plan._SPREAD_MAX_LEFT's note): stress replays
# at batches it now spreads, the spread forced past 8 leftover query tokens (9 to 16; spread_ab.py --max-left 16
# --force) against the uniform plan and the batch before, then the sparse decode curves of the six 64- and 128-head
# shapes over the batches around their perfect fits (median of 5). Output under $OUT: spread_wide.log,
# spread_wide.json, curve_*.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_spread_wide.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
SHA=${1:-}
POINTS=${POINTS:-"csa:141 csa:144 csa:148 hca:141 hca:144 hca:148 csa-s2:71 csa-s2:74 hca-s2:71 hca-s2:74 csa-h128:75
  csa-h128:78 csa-h128:82 hca-h128:75 hca-h128:78 hca-h128:82"}
{
  machine "$SHA"
  step 40 python3 -m wavemla.tools.stress --mode csa --batch 137 140 --replays 1000
  step 40 python3 -m wavemla.tools.stress --mode hca --batch 136 140 --replays 1000
  # shellcheck disable=SC2086
  step 170 python3 benchmarks/experiments/spread_ab.py "$OUT/spread_wide.json" --points $POINTS --max-left 16 --force \
    --rounds 3 --reps 10
  curve_part 60 csa 64 1 128 150
  curve_part 60 hca 64 1 128 150
  curve_part 50 csa 64 2 64 76
  curve_part 50 hca 64 2 64 76
  curve_part 50 csa 128 1 64 76
  curve_part 50 hca 128 1 64 76
} 2>&1 | quiet > "$OUT/spread_wide.log"
grep -E "spread/uniform|result:" "$OUT/spread_wide.log"
python3 benchmarks/experiments/curve_steps.py "$OUT"/curve_*.json
grep "^== " "$OUT/spread_wide.log" | grep -v "^== exit 0"
