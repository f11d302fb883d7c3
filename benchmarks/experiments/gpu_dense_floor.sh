#!/usr/bin/env bash
# Measures 95b4a07 and 2a997f3 only: the part floor was removed after (docs/dense-decode.md, "Parts and skewed
# lengths"); at later commits nothing reads WAVEMLA_DENSE_PART_FLOOR, so its two sides run the same plan.
# GPU: the dense scheduler's part floor (plan.DensePlan.min_part_weight, WAVEMLA_DENSE_PART_FLOOR): the dense kernel
# tests, then the dense FP8 16-head points of gpu_dense_parts.sh (b = 4..64 at 4K and 16K, uniform and skewed) as
# planned and with the floor off, in one run. Uniform lengths are at the block table's capacity, where the floor
# keeps every part: those rows are the control. Then skewed lengths at 64 and 128 heads (bf16 and FP8 rows), where
# the floor was not fitted, both ways.
#   BUDGET=540 bash benchmarks/experiments/gpu_dense_floor.sh SHA   (writes dense-floor-{auto,off}{,-wide}.json and
#   dense_floor.log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-540}
. "$(dirname "$0")/../budget.sh"
D="python3 -m wavemla.cli bench --dense --batch 4 8 16 32 64 --seqlen 4096 16384 --heads 16 --kv-formats fp8
  --lengths uniform skewed --reps 15 --label ${1:-}"
{
machine "${1:-}"
step 240 python3 -m pytest -q -n 12 -p no:cacheprovider tests/kernels/test_dense_decode.py \
  tests/kernels/test_dense_decode_ws.py
step 80 $D --json "$OUT/dense-floor-auto.json"
WAVEMLA_DENSE_PART_FLOOR=off step 80 $D --json "$OUT/dense-floor-off.json"
W="python3 -m wavemla.cli bench --dense --batch 8 32 64 --seqlen 4096 16384 --heads 64 128 --kv-formats bf16 fp8
  --lengths skewed --reps 15 --label ${1:-}"
step 70 $W --json "$OUT/dense-floor-auto-wide.json"
WAVEMLA_DENSE_PART_FLOOR=off step 70 $W --json "$OUT/dense-floor-off-wide.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/dense_floor.log"
grep -E "^== |ceilings|^dense|passed|failed|error" "$OUT/dense_floor.log" | cut -c1-150
