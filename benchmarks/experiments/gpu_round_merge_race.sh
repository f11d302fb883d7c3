#!/usr/bin/env bash
# GPU: cut tokens merged in the split kernel checked against the reference, plainly (50 calls a case) and under
# compute-sanitizer racecheck, for the kernel before the two-piece merge and this one (merge_race.py; run
# materialize.sh first and carry variants/); the GPU tests of the sparse decode and the stress harness on this build.
# The committed run (2026-12-01-h200-merge-race.log) was on 0b6764d, whose launcher still had the option
# count_return: there merge_race.py also ran this kernel with the read-back counter protocol, and a launch_ab.py
# step (--kw count_return=0) timed the returned count's first form (-count-return-ab.json). Neither exists now.
#   BUDGET=540 bash benchmarks/experiments/gpu_round_merge_race.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-540}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 120 python3 benchmarks/experiments/merge_race.py --reps 50
step 170 compute-sanitizer --error-exitcode 99 --tool racecheck --racecheck-report hazard \
  python3 benchmarks/experiments/merge_race.py --reps 1
step 100 python3 -m pytest -m gpu tests/kernels/test_sparse_decode.py tests/kernels/test_batch_invariance.py \
  tests/kernels/test_determinism.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider --tb=short
step 45 python3 -m wavemla.cli stress
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/merge_race.log"
grep -E "^== |calls|passed|failed|SUMMARY|result:|^csa|^hca|Error" "$OUT/merge_race.log" | cut -c1-190
