#!/usr/bin/env bash
# GPU: one round of the dense combine and planner work, writing under $OUT with the file names its results carry.
#   TESTS=1   the dense kernel and combine tests
#   GRID=1    the planner's picks at h = 16/64/128, b = 1/8/32/128, s_k = 1K/4K/16K, uniform and skewed, bf16 and
#             FP8 V3.2 -> $NAME.json
#   CURVES="bf16:16 bf16:64 fp8:16"   b = 1..128 at s_k 4K, uniform, per FORMAT:HEADS -> ${CURVE_NAME}_FORMAT_hHEADS.json
#   SANITIZE=1   memcheck and racecheck over the dense kernels (sanitizers.txt)
#   NAME=dense_round CURVE_NAME=dense_curve BUDGET=420 bash benchmarks/experiments/gpu_round_dense.sh <git-sha>
# The rounds behind 2026-11-30-h200-dense-*.json (defaults TESTS=1 GRID=1, no curves, no sanitizers):
#   NAME=dense_combine                                     the grouped combine (-dense-combine.*; run again with the
#                                                          slot levels, renamed -dense-combine-planner.*)
#   NAME=dense_final SANITIZE=1                            the unrolled combine (-dense-final.*, -sanitizers.txt)
#   NAME=dense_curve TESTS=0 GRID=0 CURVES="bf16:16 bf16:64 fp8:16"                        (-dense-curve-*.json)
#   NAME=dense_final2 CURVE_NAME=dense_curve2 CURVES="bf16:16 bf16:64 fp8:16"   fitted constants (b122a9a)
#   NAME=dense_final3 CURVE_NAME=dense_curve3 CURVES="bf16:16 fp8:16"           one program per SM at 0.85 (69a0356)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
NAME=${NAME:-dense_round}
CURVE_NAME=${CURVE_NAME:-dense_curve}
LABEL=${1:-unlabelled}
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
[ "${TESTS:-1}" = 1 ] && step 150 python3 -m pytest tests/kernels/test_dense_decode.py tests/kernels/test_combine.py -q $X \
  -p no:cacheprovider --tb=short
[ "${GRID:-1}" = 1 ] && step 120 python3 -m wavemla.cli bench --dense --batch 1 8 32 128 --seqlen 1024 4096 16384 \
  --lengths uniform skewed --reps 10 --heads 16 64 128 --kv-formats bf16 fp8 --json "$OUT/$NAME.json" --label "$LABEL"
for c in ${CURVES:-}; do
  step 120 python3 -m wavemla.cli bench --dense --batch $(seq -s ' ' 1 128) --seqlen 4096 --lengths uniform --reps 5 \
    --heads "${c##*:}" --kv-formats "${c%%:*}" --json "$OUT/${CURVE_NAME}_${c%%:*}_h${c##*:}.json" --label "$LABEL"
done
[ "${SANITIZE:-0}" = 1 ] && SANITIZERS="memcheck-dense racecheck-dense" MEMCHECK_LIMIT=80 RACECHECK_LIMIT=100 \
  step 200 bash benchmarks/sanitizers.sh
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/$NAME.log"
grep -E "^== |passed|failed|^E |rc=" "$OUT/$NAME.log" | cut -c1-160
