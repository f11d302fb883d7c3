#!/usr/bin/env bash
# The indexer's score kernel with one TMA box per page of FP8 codes against the package's gathered tiles
# (idx_score_tma.py: each kernel alone, keys compared bit for bit); the indexer's MXFP4 tests on the GPU; whole calls on
# MXFP4 against FP8 rows (idx_mxfp4.py). Output under $OUT: idx_score_tma.{json,log}, idx_mxfp4.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_score_tma.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
export PYTHONPATH=$PYTHONPATH:$PWD/benchmarks/experiments
{
  machine "$1"
  step 170 python3 benchmarks/experiments/idx_score_tma.py "$OUT/idx_score_tma.json" --reps 15
  step 130 python3 -m pytest tests/kernels/test_indexer.py -k "fp4 or mxfp4" -q -p no:cacheprovider $X
  step 250 python3 benchmarks/experiments/idx_mxfp4.py "$OUT/idx_mxfp4.json" --reps 20 --one-code --long
} 2>&1 | tee "$OUT/idx_score_tma.log"
echo "== table"
grep -E "^copy|^b=|passed|failed" "$OUT/idx_score_tma.log" | tail -50
