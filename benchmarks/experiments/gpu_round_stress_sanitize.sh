#!/usr/bin/env bash
# GPU: the stress-test file alone (as the GPU lane runs it, after the parallel tests) and the --small stress passes
# under memcheck and racecheck (FP8 16-row tiles, which now load with the L2 policies), within a budget.
#   BUDGET=300 bash benchmarks/experiments/gpu_round_stress_sanitize.sh   (writes under $OUT)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
END=$((SECONDS + ${BUDGET:-300}))
step() {  # step LIMIT COMMAND...: runs unless the budget is spent, never past it
  local limit=$1; shift
  local left=$((END - SECONDS))
  [ "$left" -lt 10 ] && { echo "== skipped (budget): $*"; return; }
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $* (limit ${limit}s)"; timeout "$limit" "$@"; echo "== exit $?"
}
{
step 100 python3 -m pytest tests/tools/test_stress.py -q -p no:cacheprovider -p no:xdist
SANITIZERS="memcheck-csa racecheck-csa" RACECHECK_LIMIT=120 step 220 bash benchmarks/sanitizers.sh
} > "$OUT/stress_sanitize.log" 2>&1
grep -E "^== |passed|failed|rc=" "$OUT/stress_sanitize.log" | cut -c1-170
