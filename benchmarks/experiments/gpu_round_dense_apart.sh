#!/usr/bin/env bash
# GPU: the dense split kernel with the rope and latent dots of keys-major tiles apart and the FP8 rows' L2 prefetch
# two tiles ahead: its GPU tests (dense, combine, hostile inputs), compute-sanitizer memcheck and racecheck over the
# dense kernels, the bf16 tile crossover grids the planner's keys-major efficiency is fitted to (the three tiles
# forced at s_k 4K, h = 64 and 128, b = 4..128; the two at s_k 16K, b = 2..16), and the planner's dense table.
#   BUDGET=560 bash benchmarks/experiments/gpu_round_dense_apart.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-560}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
{
machine "${1:-}"
step 200 python3 -m pytest -q -p no:cacheprovider -n 16 tests/kernels/test_dense_decode.py tests/kernels/test_combine.py \
  tests/test_hostile_inputs.py tests/test_plan_dense.py
step 60 compute-sanitizer --tool memcheck --error-exitcode 99 python3 benchmarks/sanitize_dense.py
step 90 compute-sanitizer --tool racecheck --error-exitcode 99 python3 benchmarks/sanitize_dense.py
step 110 $W bench --dense --kv-formats bf16 --heads 64 128 --batch 4 8 12 16 24 32 64 128 --seqlen 4096 \
  --lengths uniform --reps 10 --configs 16x32x4x3 32x32x8x3 64x64x8x2 --json "$OUT/dense_crossover4k.json" --label "${1:-unknown}"
step 80 $W bench --dense --kv-formats bf16 --heads 64 128 --batch 2 3 4 5 6 8 12 16 --seqlen 16384 --lengths uniform \
  --reps 10 --configs 16x32x4x3 64x64x8x2 --json "$OUT/dense_crossover16k.json" --label "${1:-unknown}"
step 90 $W bench --dense --kv-formats bf16 fp8 --batch 32 128 --seqlen 4096 16384 --heads 16 64 128 --lengths uniform \
  --reps 10 --json "$OUT/dense_table.json" --label "${1:-unknown}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_apart.log"
grep -E "^== |passed|failed|ERROR SUMMARY|RACECHECK SUMMARY|ceilings" "$OUT/dense_apart.log" | cut -c1-170
