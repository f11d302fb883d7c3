#!/usr/bin/env bash
# Batch-invariant pieces run: the GPU tests of the sparse kernel and of batch invariance (b = 1..256, bitwise), the
# cost of batch-invariant mode, a short table of the default path, and memcheck — inside a fixed time budget.
#   BUDGET=175 bash benchmarks/run_h200_invariant.sh <label>
set -uo pipefail
BUDGET=${BUDGET:-175}
. "$(dirname "$0")/budget.sh"
LABEL=${1:-unlabelled}
{
  step 45 python3 -m pytest tests/kernels/test_sparse_decode.py -m gpu -q -p no:cacheprovider -p no:xdist
  step 75 python3 -m pytest tests/kernels/test_batch_invariance.py -q -p no:cacheprovider -p no:xdist
  step 45 python3 benchmarks/bi_cost.py --batch 1 32 48 64 96 128 148 256 --reps 10 --json "$OUT/bi_cost.json"
  step 25 python3 -m wavemla.cli bench --mode csa hca --s-q 1 --heads 64 --batch 8 32 80 128 --reps 10 \
    --json "$OUT/bench_check.json" --label "$LABEL"
  step 40 compute-sanitizer --tool memcheck --error-exitcode 99 \
    python3 -m wavemla.tools.stress --small --mode csa --batch-invariant --replays 10
} > "$OUT/invariant.log" 2>&1
grep -E "^== |passed|failed|ERROR SUMMARY|^(csa|hca) |ratio" "$OUT/invariant.log" | cut -c1-160
