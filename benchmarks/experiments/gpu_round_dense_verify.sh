#!/usr/bin/env bash
# GPU: the dense planner's keys-major wgmma efficiency of 0.7 checked where it was not measured: the two bf16 tiles
# forced at s_k 16K, h = 64 and 128, b = 2..16 (where the model moves to keys-major 64x64 tiles), and the planner's
# picks over b = 1..128 at s_k 4K for h = 64 and 128 (per-request steps).
#   BUDGET=420 bash benchmarks/experiments/gpu_round_dense_verify.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
{
machine "${1:-}"
step 110 $W bench --dense --kv-formats bf16 --heads 64 128 --batch 2 3 4 5 6 8 12 16 --seqlen 16384 --lengths uniform \
  --reps 10 --configs 16x32x4x3 64x64x8x2 --json "$OUT/dense_crossover16k.json" --label "${1:-unknown}"
for h in 64 128; do
  step 140 $W bench --dense --kv-formats bf16 --heads $h --batch $(seq -s ' ' 1 128) --seqlen 4096 --lengths uniform \
    --reps 5 --json "$OUT/dense_curve_bf16_h$h.json" --label "${1:-unknown}"
done
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_verify.log"
grep -E "^== |Error|ceilings" "$OUT/dense_verify.log" | cut -c1-170
