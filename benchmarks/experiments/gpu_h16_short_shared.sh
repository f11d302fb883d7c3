#!/usr/bin/env bash
# Short programs kept to one an SM (plan._SHORT_SHARED_MAX_TILES): the planner's plans at 16 heads against the plans
# it made before (the same staged tile, the old tiles a program), partition_sweep.py (CUDA graph, L2 flushed, median
# of 15, every output checked against the fp64 reference); then the four 16-head b = 1..256 curves.
# Output under $OUT: short_shared.{log,json}, curve_*_h16_s*.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_h16_short_shared.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-580}
source benchmarks/budget.sh
SHA=${1:-}
T=16x32x4x3
AB=""
for p in csa-h16:20:2 csa-h16:21:2 csa-h16:24:2 csa-h16:26:2 csa-h16:40:4 csa-h16:44:4 csa-h16:48:4 csa-h16:52:4 \
  csa-s2-h16:10:2 csa-s2-h16:13:2 csa-s2-h16:20:4 csa-s2-h16:24:4 hca-h16:12:2 hca-h16:14:2 hca-h16:17:3 \
  hca-h16:19:3 hca-h16:21:3 hca-h16:22:3 hca-h16:23:4 hca-h16:26:4 hca-h16:29:4 hca-s2-h16:7:2 hca-s2-h16:10:3 \
  hca-s2-h16:11:3 hca-s2-h16:13:4; do
  AB="$AB ${p%:*}:default ${p%:*}:$T:${p##*:}"
done
AB=${POINTS:-$AB}
{
  machine "$SHA"
  # shellcheck disable=SC2086
  step 200 python3 benchmarks/experiments/partition_sweep.py --points $AB --reps 15 --json "$OUT/short_shared.json"
  curve 85 csa 16 1
  curve 85 hca 16 1
  curve 85 csa 16 2
  curve 85 hca 16 2
} 2>&1 | quiet > "$OUT/short_shared.log"
grep -E "b=|MISMATCH|Error|error" "$OUT/short_shared.log" | cut -c1-140
python3 benchmarks/experiments/curve_steps.py "$OUT"/curve_*.json
grep "^== " "$OUT/short_shared.log" | grep -v "^== exit 0" | cut -c1-120
