#!/usr/bin/env bash
# MXFP4 index-K rows on the GPU: the indexer's MXFP4 tests, then whole calls against FP8 rows (idx_mxfp4.py).
# Output under $OUT: idx_mxfp4.log, idx_mxfp4.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_mxfp4.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-210}
source benchmarks/budget.sh
export PYTHONPATH=$PYTHONPATH:$PWD/benchmarks/experiments
{
  machine "$1"
  step 110 python3 -m pytest tests/kernels/test_indexer.py -q -p no:cacheprovider $X -k "fp4 or mxfp4"
  step 95 python3 benchmarks/experiments/idx_mxfp4.py "$OUT/idx_mxfp4.json" --reps 20
} 2>&1 | tee "$OUT/idx_mxfp4.log"
echo "== table"
grep -E "^copy|^b=|passed|failed" "$OUT/idx_mxfp4.log" | tail -40
