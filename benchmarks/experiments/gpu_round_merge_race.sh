#!/usr/bin/env bash
# GPU: cut tokens merged in the split kernel checked against the reference, plainly (50 calls a case) and under
# compute-sanitizer racecheck, for the kernel before the two-piece merge, this one with the old counter protocol
# (count_return=0) and this one (merge_race.py; run materialize.sh first and carry variants/); the returned count's
# cost (launch_ab.py --kw count_return=0); the GPU tests of the sparse decode and the stress harness on this build.
# (Ran on 0b6764d, which had the option count_return; the returned count is now done in one inline-asm block
# and the option is gone, so the launch_ab step no longer applies.)
#   BUDGET=540 bash benchmarks/experiments/gpu_round_merge_race.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-540}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 120 python3 benchmarks/experiments/merge_race.py --reps 50
step 170 compute-sanitizer --error-exitcode 99 --tool racecheck --racecheck-report hazard \
  python3 benchmarks/experiments/merge_race.py --reps 1
step 80 python3 benchmarks/experiments/launch_ab.py "$OUT/count_return_ab.json" --kw count_return=0 \
  --points csa:128:1:64:2 csa:133:1:64 csa:96:2:64 hca:32:1:64:2
step 100 python3 -m pytest -m gpu tests/kernels/test_sparse_decode.py tests/kernels/test_batch_invariance.py \
  tests/kernels/test_determinism.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider --tb=short
step 45 python3 -m wavemla.cli stress
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/merge_race.log"
grep -E "^== |calls|passed|failed|SUMMARY|result:|^csa|^hca|Error" "$OUT/merge_race.log" | cut -c1-190
