#!/usr/bin/env bash
# GPU: the dense decode as shipped: the hostile-input tests on the GPU, and the batches at the edge of the planner's
# part-per-request window (h = 128 b = 58..61, h = 64 b = 119..122, bf16, 4K keys, uniform lengths).
#   BUDGET=360 bash benchmarks/experiments/gpu_dense_final.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-360}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
{
machine "${1:-}"
step 200 python3 -m pytest -q -p no:cacheprovider -n 16 tests/test_hostile_dense.py
step 60 $W bench --dense --kv-formats bf16 --heads 128 --batch 58 59 60 61 --seqlen 4096 --lengths uniform --reps 10 \
  --json "$OUT/dense-edge-h128.json" --label "${1:-unknown}"
step 60 $W bench --dense --kv-formats bf16 --heads 64 --batch 119 120 121 122 --seqlen 4096 --lengths uniform \
  --reps 10 --json "$OUT/dense-edge-h64.json" --label "${1:-unknown}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_final.log"
grep -E "^== |passed|failed|ceilings|^dense bf16" "$OUT/dense_final.log" | cut -c1-120
