#!/usr/bin/env bash
# Cases timed right after their inputs are allocated: the dense grid's first case after a new pool
# (dense_first_case.py --more: after a rebuild, no warm-up, a 1 s sleep, five reads of the pool, replays until
# stable, and b = pool) and the indexer benchmark's cases (idx_first_case.py: FP8 page-split rows with FP8 queries,
# 32K rows, b = 32 and 64, four rounds in a row, then after a rebuild and a 1 s sleep).
# Output under $OUT: first_case2.log, first_case_more.json, idx_first_case.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_first_case.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-240}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  step 120 python3 benchmarks/experiments/dense_first_case.py --more --json "$OUT/first_case_more.json"
  step 100 python3 benchmarks/experiments/idx_first_case.py --json "$OUT/idx_first_case.json"
} 2>&1 | quiet > "$OUT/first_case2.log"
grep -v -E "^torch |^commit " "$OUT/first_case2.log" | cut -c1-220 | tail -40
