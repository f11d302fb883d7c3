#!/usr/bin/env bash
# GPU: FP8 V3.2 rows in 64-row tiles passing P to the PV dot through scratch rows (their two QKᵀ dots apart)
# against P in registers, same plans (dense_pws_ab.py: the metadata without its p_ws), and the same with 64-key
# tiles forced; then the dense GPU tests and compute-sanitizer over the dense kernels.
#   BUDGET=420 bash benchmarks/experiments/gpu_round_dense_fp8ws.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 90 python3 benchmarks/experiments/dense_pws_ab.py "$OUT/dense_fp8ws.json" --reps 20 --points fp8:64:32:4096 \
  fp8:64:128:4096 fp8:64:32:16384 fp8:64:128:16384 fp8:128:32:4096 fp8:128:128:4096 fp8:64:32:4096:2
WAVEMLA_BLOCK_N=64 step 40 python3 benchmarks/experiments/dense_pws_ab.py "$OUT/dense_fp8ws_n64.json" --reps 20 \
  --points fp8:64:32:4096 fp8:64:128:4096 fp8:128:128:4096
step 200 python3 -m pytest -q -p no:cacheprovider -n 16 tests/kernels/test_dense_decode.py tests/kernels/test_combine.py \
  tests/test_hostile_inputs.py
step 60 compute-sanitizer --tool memcheck --error-exitcode 99 python3 benchmarks/sanitize_dense.py
step 90 compute-sanitizer --tool racecheck --error-exitcode 99 python3 benchmarks/sanitize_dense.py
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_fp8ws.log"
grep -E "^== |^dense|passed|failed|ERROR SUMMARY|RACECHECK SUMMARY|result" "$OUT/dense_fp8ws.log" | cut -c1-200
