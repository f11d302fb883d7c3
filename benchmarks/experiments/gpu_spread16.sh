#!/usr/bin/env bash
# The spread offered up to 16 leftover query tokens (plan._SPREAD_MAX_LEFT): the warp-specialized kernel's tests,
# stress replays at batches it now spreads, then the sparse decode curves of the six 64- and 128-head shapes around their perfect fits (median of 5),
# past the new limit. Output under $OUT: spread16.log, curve_*.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_spread16.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-500}
source benchmarks/budget.sh
SHA=${1:-}
{
  machine "$SHA"
  step 120 python3 -m pytest tests/kernels/test_sparse_decode_ws.py -q -p no:cacheprovider $X
  step 40 python3 -m wavemla.tools.stress --mode csa --batch 144 148 --replays 1000
  step 40 python3 -m wavemla.tools.stress --mode hca --batch 144 148 --replays 1000
  curve_part 70 csa 64 1 130 160
  curve_part 70 hca 64 1 130 160
  curve_part 50 csa 64 2 65 82
  curve_part 50 hca 64 2 65 82
  curve_part 50 csa 128 1 65 84
  curve_part 50 hca 128 1 65 84
} 2>&1 | quiet > "$OUT/spread16.log"
grep -E "result:|passed|failed" "$OUT/spread16.log"
python3 benchmarks/experiments/curve_steps.py "$OUT"/curve_*.json
grep "^== " "$OUT/spread16.log" | grep -v "^== exit 0"
