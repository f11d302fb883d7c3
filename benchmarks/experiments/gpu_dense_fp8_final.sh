#!/usr/bin/env bash
# GPU: FP8 V3.2 rows with the planner's staged 16-row tiles (up to 32 query rows and at h = 64 b = 1) against the
# source before them (carry build/oldsrc: `git archive REV src | tar -x -C build/oldsrc`): `wavemla bench --dense`
# alternated in two rounds at h = 16, 32, 64, 128, b = 1, 2, 8, 32, 128, 4K keys, and h = 16 at 16K keys; the
# planner's b = 1..128 curves at h = 16 and 32 (4K); then the dense and planner GPU tests.
#   BUDGET=420 bash benchmarks/experiments/gpu_dense_fp8_final.sh SHA   (writes dense-fp8-final.{log,tar.gz})
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/dense_ab.sh"
{
machine "$SHA"
for round in 1 2; do
  for v in new old; do
    ab_bench df "$round-4k" $v 70 8 --kv-formats fp8 --heads 16 32 64 128 --batch 1 2 8 32 128 --seqlen 4096 \
      --lengths uniform
    ab_bench df "$round-16k" $v 40 8 --kv-formats fp8 --heads 16 --batch 8 32 128 --seqlen 16384 \
      --lengths uniform skewed
  done
done
for h in 16 32; do
  step 60 python3 -m wavemla.cli bench --dense --kv-formats fp8 --heads $h --batch $(seq -s ' ' 1 128) --seqlen 4096 \
    --lengths uniform --reps 5 --json "$OUT/dense-fp8-curve-h$h.json" --label "$SHA"
done
step 150 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_dense_decode.py tests/test_hostile_dense.py \
  tests/test_plan_dense.py
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense-fp8-final.log"
grep -E "^== |passed|failed" "$OUT/dense-fp8-final.log" | cut -c1-150 | tail -6
ab_tables dense-fp8-final df split_us
python3 benchmarks/experiments/dense_curve_steps.py "$OUT"/dense-fp8-curve-h*.json 2>&1 | grep -E "json|steps|->"

