#!/usr/bin/env bash
# GPU: the closing checks of the dense-decode build (one bf16 dot of P, Sᵀ split over the warpgroups on sm_90):
# the h=64 tile crossover at small batch (the planner's pick beside 16x32x4x3 and keys-major 64x64x8x2 forced),
# the whole GPU test lane (stress tests alone after it), the demo, and the bf16 dense table of this build.
#   BUDGET=500 bash benchmarks/experiments/gpu_round_close2.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-500}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
{
machine "${1:-}"
step 70 $W bench --dense --kv-formats bf16 --heads 64 --batch 4 8 12 16 24 --seqlen 4096 --lengths uniform --reps 10 \
  --configs 16x32x4x3 64x64x8x2 --json "$OUT/dense_crossover.json" --label "${1:-unknown}"
SKIP_BENCH=1 step 300 bash benchmarks/gpu_lane.sh "${1:-unknown}"
step 30 $W demo
step 80 $W bench --dense --kv-formats bf16 --batch 32 128 --seqlen 4096 16384 --heads 16 64 128 --lengths uniform \
  --reps 10 --json "$OUT/dense_table.json" --label "${1:-unknown}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/close2.log"
grep -E "^== |passed|failed|error|result|mismatch|ceilings|^dense" "$OUT/close2.log" | cut -c1-170
