#!/usr/bin/env bash
# GPU: the L2-policy knob's bit test, and the in-kernel merge timed alone (merge_micro.py).
#   bash benchmarks/experiments/gpu_round_merge_micro.sh   (writes under $OUT; about 3 minutes)
set -uo pipefail
BUDGET=${BUDGET:-400}
source benchmarks/budget.sh
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step 120 python3 -m pytest tests/kernels/test_sparse_decode.py -k "l2_policies" -q -p no:cacheprovider
step 240 python3 benchmarks/experiments/merge_micro.py "$OUT/merge_micro.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" | tee "$OUT/merge_micro.log"
