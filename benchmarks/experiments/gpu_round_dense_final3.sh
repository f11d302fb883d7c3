#!/usr/bin/env bash
# GPU: the dense planner with one program per SM at 0.85: dense kernel tests, the grid of gpu_round_dense_combine.sh and
# the h=16 b = 1..128 curves of gpu_round_dense_curve.sh (bf16, FP8), the planner's picks.
#   BUDGET=420 bash benchmarks/experiments/gpu_round_dense_final3.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli bench --dense --batch $(seq -s ' ' 1 128) --seqlen 4096 --lengths uniform --reps 5"
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step 150 python3 -m pytest tests/kernels/test_dense_decode.py tests/kernels/test_combine.py -q $X -p no:cacheprovider --tb=short
step 120 python3 -m wavemla.cli bench --dense --batch 1 8 32 128 --seqlen 1024 4096 16384 --lengths uniform skewed --reps 10 \
  --heads 16 64 128 --kv-formats bf16 fp8 --json "$OUT/dense_final3.json" --label "${1:-unlabelled}"
step 90 $W --heads 16 --kv-formats bf16 --json "$OUT/dense_curve3_bf16_h16.json" --label "${1:-unlabelled}"
step 90 $W --heads 16 --kv-formats fp8 --json "$OUT/dense_curve3_fp8_h16.json" --label "${1:-unlabelled}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_final3.log"
grep -E "^== |passed|failed|^E " "$OUT/dense_final3.log" | cut -c1-160
