#!/usr/bin/env bash
# GPU: the dense combine with unrolled groups and the planner that prices it (fewer parts for small work): dense
# kernel tests, memcheck and racecheck over the dense kernels, and the dense grid of gpu_round_dense_combine.sh
# with the planner's picks.
#   BUDGET=420 bash benchmarks/experiments/gpu_round_dense_final.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step 150 python3 -m pytest tests/kernels/test_dense_decode.py tests/kernels/test_combine.py -q $X -p no:cacheprovider --tb=short
step 120 python3 -m wavemla.cli bench --dense --batch 1 8 32 128 --seqlen 1024 4096 16384 --lengths uniform skewed --reps 10 \
  --heads 16 64 128 --kv-formats bf16 fp8 --json "$OUT/dense_final.json" --label "${1:-unlabelled}"
SANITIZERS="memcheck-dense racecheck-dense" MEMCHECK_LIMIT=80 RACECHECK_LIMIT=100 step 200 bash benchmarks/sanitizers.sh
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_final.log"
grep -E "^== |passed|failed|^E |rc=" "$OUT/dense_final.log" | cut -c1-200
