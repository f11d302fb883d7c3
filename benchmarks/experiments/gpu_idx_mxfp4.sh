#!/usr/bin/env bash
# MXFP4 index-K rows on the GPU: the indexer's MXFP4 tests, then whole calls against FP8 rows (idx_mxfp4.py).
# Output under $OUT: idx_mxfp4.log, idx_mxfp4.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_mxfp4.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-150}
source benchmarks/budget.sh
export PYTHONPATH=$PYTHONPATH:$PWD/benchmarks/experiments
{
  machine "$1"
  step 75 python3 -m pytest tests/kernels/test_indexer.py -q -p no:cacheprovider $X \
    -k "mxfp4_decode_every_code or (random_data and fp4)"
  step 70 python3 benchmarks/experiments/idx_mxfp4.py "$OUT/idx_mxfp4.json" --reps 20
} 2>&1 | tee "$OUT/idx_mxfp4.log"
echo "== table"
grep -E "^copy|^b=|passed|failed" "$OUT/idx_mxfp4.log" | tail -40
