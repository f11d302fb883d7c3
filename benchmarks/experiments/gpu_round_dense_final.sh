#!/usr/bin/env bash
# GPU: the closing run of a dense build: its GPU tests (dense, combine, hostile inputs,
# dense planner), compute-sanitizer memcheck and racecheck over the dense kernels, the planner's dense table, and
# its b = 1..128 curves at s_k 4K for bf16 h = 64 and 128.
#   BUDGET=540 bash benchmarks/experiments/gpu_round_dense_final.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-540}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
{
machine "${1:-}"
step 200 python3 -m pytest -q -p no:cacheprovider -n 16 tests/kernels/test_dense_decode.py tests/kernels/test_combine.py \
  tests/test_hostile_inputs.py tests/test_plan_dense.py
step 60 compute-sanitizer --tool memcheck --error-exitcode 99 python3 benchmarks/sanitize_dense.py
step 90 compute-sanitizer --tool racecheck --error-exitcode 99 python3 benchmarks/sanitize_dense.py
step 90 $W bench --dense --kv-formats bf16 fp8 --batch 32 128 --seqlen 4096 16384 --heads 16 64 128 --lengths uniform \
  --reps 10 --json "$OUT/dense_table.json" --label "${1:-unknown}"
for h in 64 128; do
  step 90 $W bench --dense --kv-formats bf16 --heads $h --batch $(seq -s ' ' 1 128) --seqlen 4096 --lengths uniform \
    --reps 5 --json "$OUT/dense_curve_bf16_h$h.json" --label "${1:-unknown}"
done
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_final.log"
grep -E "^== |passed|failed|ERROR SUMMARY|RACECHECK SUMMARY|ceilings" "$OUT/dense_final.log" | cut -c1-170
