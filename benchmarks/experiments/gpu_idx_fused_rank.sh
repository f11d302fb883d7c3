#!/usr/bin/env bash
# The spread select as one launch (benchmarks/experiments/idx_fused_rank.patch, not in the package: the last of a
# token's parts to finish ranks it, counted in on a per-token ticket that the score kernel zeroes, with about one
# program per SM since the ranking part holds 128 registers) against the shipped count and rank launches. The patch
# is applied to this checkout's indexer.py and its test (the shipped indexer.py kept as the base), then: the
# indexer's GPU tests on the patched package, the spread select against the per-token one (idx_spread_check.py),
# alone and under compute-sanitizer memcheck, and whole calls of both builds in one process (idx_ab.py, alternated
# rounds). Output under $OUT: idx_fused.log, idx_fused_ab.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_fused_rank.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
export PYTHONPATH=$PYTHONPATH:$PWD/benchmarks/experiments
SHAPES=${SHAPES:-32:32768 64:32768 1:32768 8:32768 16:32768}
cp src/wavemla/kernels/indexer.py "$OUT/base_indexer.py"
git apply benchmarks/experiments/idx_fused_rank.patch || { echo "idx_fused_rank.patch does not apply"; exit 1; }
{
  machine "$1"
  step 200 python3 -m pytest tests/kernels/test_indexer.py -m gpu -q -p no:cacheprovider $X
  step 40 python3 benchmarks/experiments/idx_spread_check.py
  step 90 compute-sanitizer --tool memcheck --error-exitcode 99 python3 benchmarks/experiments/idx_spread_check.py
  step 240 python3 benchmarks/experiments/idx_ab.py "$OUT/idx_fused_ab.json" "$OUT/base_indexer.py" $SHAPES \
    --paths spread --rounds 2
} 2>&1 | quiet | tee "$OUT/idx_fused.log" | tail -40
