#!/usr/bin/env bash
# Batch-invariant cost (benchmarks/bi_cost.py, CSA and HCA, h = 64, FP8, b = 32, 128, 133, 256 unless BATCHES
# says, median of 10) timed the old way (3 untimed calls before each timed set: WARM_MS = 0, WARM_CALLS = 3) and
# with the benchmarks' warm-up under load, one process each. bi_cost.py times the default plan first after it builds each batch's inputs.
# Output under $OUT: bi_warm.log, bi_old.json, bi_warm.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_bi_warm.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-160}
source benchmarks/budget.sh
B="--batch ${BATCHES:-32 128 133 256} --reps 10"
{
  machine "${1:-unknown}"
  step 75 python3 -c "
import runpy, sys
import wavemla.tools.bench as bench
bench.WARM_MS, bench.WARM_CALLS = 0.0, 3
sys.argv = ['bi_cost.py'] + sys.argv[1:]
runpy.run_path('benchmarks/bi_cost.py', run_name='__main__')
" $B --json "$OUT/bi_old.json"
  step 75 python3 benchmarks/bi_cost.py $B --json "$OUT/bi_warm.json"
} 2>&1 | quiet > "$OUT/bi_warm.log"
grep -v -E "^torch |^import|^from|^bench\.|^sys\.|^runpy|^\" " "$OUT/bi_warm.log" | cut -c1-200 | tail -45
