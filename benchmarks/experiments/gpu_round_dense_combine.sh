#!/usr/bin/env bash
# GPU: the dense combine that merges a request's pieces a group per memory round trip: dense kernel tests, then the
# planner's picks over h = 16/64/128, b = 1/8/32/128, s_k = 1K/4K/16K, bf16 rows and FP8 V3.2 (uniform lengths), to
# set against the same points of 2026-11-30-h200-dense-cal.log (the one-piece-per-round-trip combine).
#   BUDGET=300 bash benchmarks/experiments/gpu_round_dense_combine.sh   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-300}
. "$(dirname "$0")/../budget.sh"
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step 150 python3 -m pytest tests/kernels/test_dense_decode.py tests/kernels/test_combine.py -q $X -p no:cacheprovider --tb=short
step 120 python3 -m wavemla.cli bench --dense --batch 1 8 32 128 --seqlen 1024 4096 16384 --lengths uniform skewed --reps 10 \
  --heads 16 64 128 --kv-formats bf16 fp8 --json "$OUT/dense_combine.json" --label "${1:-unlabelled}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_combine.log"
grep -E "^== |passed|failed|^E " "$OUT/dense_combine.log"; grep -E "b1 |b8 " "$OUT/dense_combine.log" | head -40 | cut -c1-170
