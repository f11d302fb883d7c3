#!/usr/bin/env bash
# GPU: the closing checks of the two-piece merge build, beside run_h200_decode.sh (tables, curves, tests, stress):
# the batch-invariant cost at every b the issue's aim covers that the tables name (median of 30), compute-sanitizer
# over the in-kernel merges (two pieces, three, batch-invariant ones), and the dense decode's GPU tests (its planner
# constant changed).
#   BUDGET=480 bash benchmarks/experiments/gpu_round_merge_pair_close.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-480}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 170 python3 benchmarks/bi_cost.py --batch 32 48 64 96 128 148 192 256 --reps 30 --json "$OUT/bi_cost_wide.json"
OUT=$OUT SANITIZERS="memcheck-pair racecheck-pair memcheck-merge racecheck-merge" RACECHECK_LIMIT=100 \
  step 330 bash benchmarks/sanitizers.sh
cat "$OUT/sanitizers.txt"
step 90 python3 -m pytest -m gpu tests/kernels/test_dense_decode.py tests/test_plan_dense.py -q $X -p no:cacheprovider \
  --tb=short
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/close.log"
grep -E "^== |passed|failed|rc=|^E |^csa|^hca|^mode" "$OUT/close.log" | cut -c1-170
