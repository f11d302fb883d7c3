#!/usr/bin/env bash
# The dense grid's first case after a new cache pool (dense_first_case.py: timed four times in a row, then after a
# rebuild with each warm-up), the planner's bf16 h = 16 pick against both 16-head tiles forced at b = 32, 64, 128
# with 4K and 16K keys (`wavemla bench --dense`, median of 15), and the dense GPU tests.
# Output under $OUT: first_case.log, first_case.json, h16_pick.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_dense_first_case.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-400}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  step 120 python3 benchmarks/experiments/dense_first_case.py --json "$OUT/first_case.json"
  step 100 python3 -m wavemla.cli bench --dense --heads 16 --kv-formats bf16 --configs 16x16x4x3 16x32x4x3 \
    --batch 32 64 128 --seqlen 4096 16384 --reps 15 --json "$OUT/h16_pick.json"
  step 150 python3 -m pytest tests/kernels/test_dense_decode.py tests/test_plan_dense.py -q -p no:cacheprovider $X
} 2>&1 | quiet > "$OUT/first_case.log"
grep -E "^== |passed|failed|after|first|^dense .*uniform|ceiling" "$OUT/first_case.log" | cut -c1-200 | tail -60
