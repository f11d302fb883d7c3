#!/usr/bin/env bash
# The lightning indexer after the wider list block (32 query tokens or more): its GPU tests, the spread select against
# the per-token one (idx_spread_check.py), and the spread and per-token selects timed (idx_select.py). Output under
# $OUT: idx_final.log, idx_select.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_wide_list.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-420}
source benchmarks/budget.sh
{
  machine "$1"
  step 200 python3 -m pytest tests/kernels/test_indexer.py -m gpu -q -p no:cacheprovider $X
  step 40 python3 benchmarks/experiments/idx_spread_check.py
  step 180 python3 benchmarks/experiments/idx_select.py "$OUT/idx_select.json" --reps 15 --paths spread token \
    --shapes 32:32768:fp8-paged 64:32768:fp8-paged 128:32768:fp8-paged 32:32768:bf16 64:32768:bf16 \
    1:32768:fp8-paged 8:32768:fp8-paged 16:32768:fp8-paged 32:262144:fp8-paged 64:262144:fp8-paged
} 2>&1 | quiet | tee "$OUT/idx_final.log" | tail -40
