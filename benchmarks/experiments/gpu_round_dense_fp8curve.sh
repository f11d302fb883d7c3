#!/usr/bin/env bash
# GPU: the dense planner's FP8 V3.2 picks over b = 1..128 at s_k 4K, h = 64 and 128 (per-request steps), on the
# kernel whose 64-row FP8 tiles pass P through scratch rows.
#   BUDGET=200 bash benchmarks/experiments/gpu_round_dense_fp8curve.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-200}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
for h in 64 128; do
  step 90 python3 -m wavemla.cli bench --dense --kv-formats fp8 --heads $h --batch $(seq -s ' ' 1 128) --seqlen 4096 \
    --lengths uniform --reps 5 --json "$OUT/dense_fp8curve_h$h.json" --label "${1:-unknown}"
done
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_fp8curve.log"
grep -E "^== |ceilings" "$OUT/dense_fp8curve.log" | cut -c1-170
