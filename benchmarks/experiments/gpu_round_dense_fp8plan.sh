#!/usr/bin/env bash
# GPU: the dense planner's FP8 picks with the FP8 decode cost at 0.08 µs a row (commit 622029a; reverted to 0.02
# after this run): b = 1..12 at s_k 4K for h = 64 and 128
# (against the forced tiles of gpu_round_dense_fp8cross.sh), and the planner's FP8 table (b 32/128, s_k 4K/16K,
# h 16/64/128).
#   BUDGET=200 bash benchmarks/experiments/gpu_round_dense_fp8plan.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-200}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli bench --dense --kv-formats fp8 --lengths uniform"
{
machine "${1:-}"
step 60 $W --heads 64 128 --batch 1 2 3 4 5 6 8 12 --seqlen 4096 --reps 10 --json "$OUT/dense_fp8plan.json" --label "${1:-unknown}"
step 90 $W --heads 16 64 128 --batch 32 128 --seqlen 4096 16384 --reps 10 --json "$OUT/dense_fp8table.json" --label "${1:-unknown}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_fp8plan.log"
grep -E "^== |ceilings" "$OUT/dense_fp8plan.log" | cut -c1-170
