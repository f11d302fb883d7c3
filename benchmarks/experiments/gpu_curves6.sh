#!/usr/bin/env bash
# The six 64- and 128-head sparse decode curves (CSA and HCA; h=64 s_q=1 and 2, h=128 s_q=1; b = 1..256, median of 5,
# the planner's plans) in one call, and their per-request steps above 5%. Output under $OUT: curves6.log,
# curve_{mode}_h{heads}_s{s_q}.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_curves6.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-500}
source benchmarks/budget.sh
SHA=${1:-}
{
  machine "$SHA"
  for mode in csa hca; do curve 90 $mode 64 1; curve 90 $mode 64 2; curve 90 $mode 128 1; done
} 2>&1 | quiet > "$OUT/curves6.log"
python3 benchmarks/experiments/curve_steps.py "$OUT"/curve_*.json
grep "^== " "$OUT/curves6.log" | grep -v "^== exit 0" | cut -c1-120
