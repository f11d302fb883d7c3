#!/usr/bin/env bash
# GPU: compute-sanitizer over the sparse staged FP8 tiles (memcheck of the --small CSA stress, which plans 16 heads in
# them, and memcheck and racecheck of their tests), after the dense FP8 h=16 b=8 16K skewed point that the staged
# dense tiles made slower (the planner's 264 parts, 132 parts, and the register tile 16x64x8x1) and the staged tile at
# 32 heads against the register tile at the same partitions.
#   bash benchmarks/experiments/gpu_sparse_staged_checks.sh SHA   (writes sanitizers.{log,txt} and dense_skew.log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-120}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
D="python3 -m wavemla.cli bench --dense --batch 8 --seqlen 16384 --heads 16 --kv-formats fp8 --lengths skewed --reps 15"
step 40 $D
WAVEMLA_TARGET_CTAS=132 step 40 $D
step 40 $D --configs 16x64x8x1
# 32 heads (two 16-head blocks a token): the planner's staged plan against the register tile at its partition
step 60 python3 benchmarks/experiments/partition_sweep.py --reps 15 --points csa-h32:8:default csa-h32:8:16x32x4x1:2 \
  csa-h32:32:default csa-h32:32:16x32x4x1:5 csa-h32:128:default csa-h32:128:16x32x4x1:20 hca-h32:32:default \
  hca-h32:32:16x32x4x1:9
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/dense_skew.log"
grep -E "^== |ceilings| b8 | b=" "$OUT/dense_skew.log" | cut -c1-160
SANITIZERS="memcheck-csa memcheck-staged racecheck-staged" RACECHECK_LIMIT=${RACECHECK_LIMIT:-120} \
  bash "$(dirname "$0")/../sanitizers.sh"
