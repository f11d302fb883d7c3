#!/usr/bin/env bash
# GPU: compute-sanitizer memcheck over the sparse staged FP8 tiles' tests (whole and cut tokens, a list past one chunk
# of index entries, bf16 q converted in registers), the staged tile at 32 heads against the register tile at the
# same partitions, then the dense FP8 h=16 b=8 16K skewed point that the staged dense tiles made slower (the
# planner's 264 parts, 132 parts, and the register tile 16x64x8x1).
#   BUDGET=200 bash benchmarks/experiments/gpu_sparse_staged_checks.sh SHA   (writes sanitizers.{log,txt} and
#   staged_checks.log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-200}
. "$(dirname "$0")/../budget.sh"
SANITIZERS="memcheck-staged" bash "$(dirname "$0")/../sanitizers.sh"
{
machine "${1:-}"
step 50 python3 benchmarks/experiments/partition_sweep.py --reps 15 --points csa-h32:8:default csa-h32:8:16x32x4x1:2 \
  csa-h32:32:default csa-h32:32:16x32x4x1:5 csa-h32:128:default csa-h32:128:16x32x4x1:20 hca-h32:32:default \
  hca-h32:32:16x32x4x1:9
D="python3 -m wavemla.cli bench --dense --batch 8 --seqlen 16384 --heads 16 --kv-formats fp8 --lengths skewed --reps 15"
step 25 $D
WAVEMLA_TARGET_CTAS=132 step 25 $D
step 25 $D --configs 16x64x8x1
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/staged_checks.log"
grep -E "^== |ceilings| b8 | b=" "$OUT/staged_checks.log" | cut -c1-160
