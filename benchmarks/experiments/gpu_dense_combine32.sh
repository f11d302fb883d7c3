#!/usr/bin/env bash
# GPU: the dense combine at 32 pieces a step past 16 (plan.dense_combine_shape): the combine and dense kernel tests,
# then `wavemla bench --dense` against the shape before (bench_combine16.py), alternated in one run: 16 heads FP8
# b = 4..64 at 4K and 16K, uniform and skewed lengths; 64 and 128 heads bf16 b = 1..8 (requests of 17-133 pieces).
#   BUDGET=480 bash benchmarks/experiments/gpu_dense_combine32.sh SHA   (writes dense-c32-{new,old}{,-wide}.json and
#   dense_combine32.log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-480}
. "$(dirname "$0")/../budget.sh"
A="--dense --batch 4 8 16 32 64 --seqlen 4096 16384 --heads 16 --kv-formats fp8 --lengths uniform skewed --reps 15
  --label ${1:-}"
W="--dense --batch 1 2 4 8 --seqlen 4096 16384 --heads 64 128 --kv-formats bf16 --lengths uniform skewed --reps 15
  --label ${1:-}"
{
machine "${1:-}"
step 150 python3 -m pytest -q -n 12 -p no:cacheprovider tests/kernels/test_combine.py tests/kernels/test_dense_decode.py \
  tests/kernels/test_dense_decode_ws.py
step 80 python3 -m wavemla.cli bench $A --json "$OUT/dense-c32-new.json"
step 80 python3 benchmarks/experiments/bench_combine16.py $A --json "$OUT/dense-c32-old.json"
step 70 python3 -m wavemla.cli bench $W --json "$OUT/dense-c32-new-wide.json"
step 70 python3 benchmarks/experiments/bench_combine16.py $W --json "$OUT/dense-c32-old-wide.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/dense_combine32.log"
grep -E "^== |passed|failed|error" "$OUT/dense_combine32.log" | cut -c1-150
