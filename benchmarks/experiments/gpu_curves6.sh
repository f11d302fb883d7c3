#!/usr/bin/env bash
# The six 64- and 128-head sparse decode curves (CSA and HCA; h=64 s_q=1 and 2, h=128 s_q=1; b = 1..256, median of 5,
# the planner's plans) in one call, and their per-request steps above 5%. CURVES (MODE:HEADS:S_Q ...) runs others
# instead, e.g. CURVES="csa:16:1 csa:16:2 hca:16:1 hca:16:2". Output under $OUT: curves6.log,
# curve_{mode}_h{heads}_s{s_q}.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_curves6.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-500}
source benchmarks/budget.sh
SHA=${1:-}
CURVES=${CURVES:-csa:64:1 csa:64:2 csa:128:1 hca:64:1 hca:64:2 hca:128:1}
{
  machine "$SHA"
  for c in $CURVES; do IFS=: read -r mode heads s_q <<< "$c"; curve 90 "$mode" "$heads" "$s_q"; done
} 2>&1 | quiet > "$OUT/curves6.log"
python3 benchmarks/experiments/curve_steps.py "$OUT"/curve_*.json
grep "^== " "$OUT/curves6.log" | grep -v "^== exit 0" | cut -c1-120
