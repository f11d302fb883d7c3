#!/usr/bin/env bash
# GPU: dense decode at every b = 1..128 (s_k = 4K, uniform; bf16 h=16 and h=64, FP8 h=16), the planner's picks:
# per-request time against b, to find steps (wave cliffs).
#   BUDGET=300 bash benchmarks/experiments/gpu_round_dense_curve.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-300}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli bench --dense --batch $(seq -s ' ' 1 128) --seqlen 4096 --lengths uniform --reps 5"
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step 90 $W --heads 16 --kv-formats bf16 --json "$OUT/dense_curve_bf16_h16.json" --label "${1:-unlabelled}"
step 120 $W --heads 64 --kv-formats bf16 --json "$OUT/dense_curve_bf16_h64.json" --label "${1:-unlabelled}"
step 90 $W --heads 16 --kv-formats fp8 --json "$OUT/dense_curve_fp8_h16.json" --label "${1:-unlabelled}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_curve.log"
grep -E "^== " "$OUT/dense_curve.log"
