#!/usr/bin/env bash
# GPU: the stress-test file alone (as the GPU lane runs it, after the parallel tests) and the --small stress passes
# under memcheck and racecheck (FP8 16-row tiles, which now load with the L2 policies), within a budget.
#   BUDGET=300 bash benchmarks/experiments/gpu_round_stress_sanitize.sh   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-300}
. "$(dirname "$0")/../budget.sh"
{
step 100 python3 -m pytest tests/tools/test_stress.py -q -p no:cacheprovider -p no:xdist
SANITIZERS="memcheck-csa racecheck-csa" RACECHECK_LIMIT=120 step 220 bash benchmarks/sanitizers.sh
} > "$OUT/stress_sanitize.log" 2>&1
grep -E "^== |passed|failed|rc=" "$OUT/stress_sanitize.log" | cut -c1-170
