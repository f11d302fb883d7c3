#!/usr/bin/env bash
# GPU: the dense decode's candidate tiles, each forced, over h = 16/64/128, b = 1/8/32/128, s_k = 1K/4K/16K, bf16
# rows and FP8 V3.2 (uniform lengths; the planner picks the parts for each tile): the data of the dense cost model's
# calibration (fit_dense.py).
#   BUDGET=400 bash benchmarks/experiments/gpu_round_dense_cal.sh   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-400}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli bench --dense --batch 1 8 32 128 --seqlen 1024 4096 16384 --lengths uniform --reps 5"
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step 60 $W --heads 16 --kv-formats bf16 --configs 16x32x4x3 16x64x4x3 16x16x4x3 --json "$OUT/dense_cal_bf16_h16.json"
step 140 $W --heads 64 128 --kv-formats bf16 --configs 64x64x8x2 32x32x8x3 16x32x4x3 --json "$OUT/dense_cal_bf16_h64.json"
step 60 $W --heads 16 --kv-formats fp8 --configs 16x32x8x1 16x32x4x1 16x64x8x1 --json "$OUT/dense_cal_fp8_h16.json"
step 120 $W --heads 64 128 --kv-formats fp8 --configs 64x32x8x1 32x32x8x1 16x32x8x1 --json "$OUT/dense_cal_fp8_h64.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_cal.log"
grep -E "^== " "$OUT/dense_cal.log"; tail -4 "$OUT/dense_cal.log" | cut -c1-200
