#!/usr/bin/env bash
# GPU: the FP8 V3.2 tile crossover at small batch after the 64-row FP8 tiles took scratch rows for P: the three
# candidate tiles forced at h = 64 and 128, s_k 4K and 16K (the planner picking the parts for each tile).
#   BUDGET=200 bash benchmarks/experiments/gpu_round_dense_fp8cross.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-200}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli bench --dense --kv-formats fp8 --lengths uniform --reps 10 --configs 64x32x8x1 32x32x8x1 16x32x8x1"
{
machine "${1:-}"
step 90 $W --heads 64 128 --batch 1 2 3 4 6 8 12 --seqlen 4096 --json "$OUT/dense_fp8cross4k.json" --label "${1:-unknown}"
step 60 $W --heads 64 128 --batch 1 2 3 4 --seqlen 16384 --json "$OUT/dense_fp8cross16k.json" --label "${1:-unknown}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_fp8cross.log"
grep -E "^== |ceilings" "$OUT/dense_fp8cross.log" | cut -c1-170
