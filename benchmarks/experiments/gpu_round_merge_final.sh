#!/usr/bin/env bash
# GPU: the closing checks of the returned-count merge protocol (_completes_count): compute-sanitizer racecheck and
# memcheck over the in-kernel merge tests (racecheck's timing is what split a CTA under the old protocol), the
# cut-token merges against the reference under racecheck for this build and the one before the two-piece merge
# (merge_race.py; run materialize.sh first and carry variants/), the GPU tests of the sparse decode, the stress
# harness and the batch-invariant cost.
#   BUDGET=380 bash benchmarks/experiments/gpu_round_merge_final.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-380}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
OUT=$OUT SANITIZERS="racecheck-pair memcheck-pair racecheck-merge" RACECHECK_LIMIT=90 step 200 bash benchmarks/sanitizers.sh
cat "$OUT/sanitizers.txt"
step 70 compute-sanitizer --error-exitcode 99 --tool racecheck --racecheck-report hazard \
  python3 benchmarks/experiments/merge_race.py --reps 1
step 90 python3 -m pytest -m gpu tests/kernels/test_sparse_decode.py tests/kernels/test_batch_invariance.py \
  tests/kernels/test_determinism.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider --tb=short
step 40 python3 -m wavemla.cli stress
step 60 python3 benchmarks/bi_cost.py --batch 32 64 128 256 --reps 15 --json "$OUT/bi_cost.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/merge_final.log"
grep -E "^== |calls|passed|failed|SUMMARY|rc=|result:|^csa|^hca|^mode|Error" "$OUT/merge_final.log" | cut -c1-170
