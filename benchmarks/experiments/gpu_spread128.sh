#!/usr/bin/env bash
# The spread partition offered to 128 leftover query tokens, the model deciding (run on ccf4385, which set
# plan._SPREAD_MAX_LEFT to 128; reverted, see that constant's note): the warp-specialized kernel's GPU tests, stress
# replays at batches it spreads past 32 leftover tokens, then the sparse decode curves of the six 64- and 128-head
# shapes over those batches (median of 5). Output under $OUT: spread128.log, curve_*.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_spread128.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
SHA=${1:-}
{
  machine "$SHA"
  # shellcheck disable=SC2086
  step 170 python3 -m pytest -q -p no:cacheprovider $X -m gpu tests/kernels/test_sparse_decode_ws.py
  step 45 python3 -m wavemla.tools.stress --mode csa --batch 170 200 --replays 500
  step 45 python3 -m wavemla.tools.stress --mode hca --batch 170 200 230 --replays 500
  step 45 python3 -m wavemla.tools.stress --mode hca --s-q 2 --batch 83 100 --replays 500
  curve_part 50 csa 64 1 160 214
  curve_part 60 hca 64 1 160 238
  curve_part 40 csa 64 2 80 108
  curve_part 40 hca 64 2 80 120
  curve_part 40 csa 128 1 80 108
  curve_part 40 hca 128 1 80 120
} 2>&1 | quiet > "$OUT/spread128.log"
grep -E "passed|failed|result:" "$OUT/spread128.log"
python3 benchmarks/experiments/curve_steps.py "$OUT"/curve_*.json
grep "^== " "$OUT/spread128.log" | grep -v "^== exit 0"
