#!/usr/bin/env bash
# GPU: the dense decode with its warp-specialized sm_90 kernel, in two calls.
#   PART=checks BUDGET=560 bash benchmarks/experiments/gpu_dense_ws_final.sh <git-sha>
#     GPU tests (dense, combine, hostile inputs, dense planner, the Gluon kernel's build), compute-sanitizer memcheck
#     and racecheck over the dense kernels, the planner's crossover (16x32x4x3 against 64x64x8x2 forced, h = 64 and
#     128, small b at s_k 4K and 16K)
#   PART=grid BUDGET=560 bash benchmarks/experiments/gpu_dense_ws_final.sh <git-sha>
#     the planner's choice over b 1, 8, 32, 64, 128 x s_k 1K, 4K, 16K, 64K x h 16, 64, 128, uniform and skewed
#     lengths, bf16 rows (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-560}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
if [ "${PART:-checks}" = checks ]; then
{
machine "${1:-}"
step 150 python3 -m pytest -q -p no:cacheprovider -n 16 tests/kernels/test_dense_decode.py tests/kernels/test_combine.py \
  tests/test_hostile_inputs.py tests/test_plan_dense.py tests/kernels/test_dense_decode_ws.py
step 70 compute-sanitizer --tool memcheck --error-exitcode 99 python3 benchmarks/sanitize_dense.py
step 100 compute-sanitizer --tool racecheck --error-exitcode 99 python3 benchmarks/sanitize_dense.py
step 100 $W bench --dense --kv-formats bf16 --heads 64 128 --batch 1 2 4 8 16 --seqlen 4096 16384 \
  --lengths uniform --reps 10 --configs 16x32x4x3 64x64x8x2 --json "$OUT/dense_ws_crossover.json" --label "${1:-unknown}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_ws_checks.log"
grep -E "^== |passed|failed|ERROR SUMMARY|RACECHECK SUMMARY|ceilings" "$OUT/dense_ws_checks.log" | cut -c1-170
else
{
machine "${1:-}"
step ${GRID_LIMIT:-500} $W bench --dense --kv-formats bf16 --batch 1 8 32 64 128 --seqlen 1024 4096 16384 65536 --heads 16 64 128 \
  --lengths uniform skewed --reps 10 --json "$OUT/dense_ws_grid.json" --label "${1:-unknown}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_ws_grid.log"
grep -E "^== |ceilings" "$OUT/dense_ws_grid.log" | cut -c1-170
grep -E "^dense" "$OUT/dense_ws_grid.log" | cut -c1-150 | tail -130
fi
