#!/usr/bin/env bash
# GPU: the planner's FP8 V3.2 picks over b = 1..128 at h = 16 and 32, 4K keys (per-request steps), a dense stress run
# over FP8 rows, and compute-sanitizer memcheck and racecheck over the dense kernels (staged 16-row FP8 tiles
# included: the FP8 case of sanitize_dense.py has 32 query rows).
#   BUDGET=400 bash benchmarks/experiments/gpu_dense_fp8_checks.sh SHA   (writes dense-fp8-checks.log, the curves)
set -uo pipefail
BUDGET=${BUDGET:-400}
. "$(dirname "$0")/../budget.sh"
SAN="compute-sanitizer --error-exitcode 99"
{
machine "${1:-}"
for h in 16 32; do
  step 80 python3 -m wavemla.cli bench --dense --kv-formats fp8 --heads $h --batch $(seq -s ' ' 1 128) --seqlen 4096 \
    --lengths uniform --reps 5 --json "$OUT/dense-fp8-curve-h$h.json" --label "${1:-unknown}"
done
step 40 python3 -m wavemla.tools.stress --mode dense --heads 16 --replays 2000
PYTORCH_NO_CUDA_MEMORY_CACHING=1 step 90 $SAN --tool memcheck python3 benchmarks/sanitize_dense.py
step 90 $SAN --tool racecheck --racecheck-report hazard python3 benchmarks/sanitize_dense.py
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense-fp8-checks.log"
grep -E "^== |passed|failed|mismatch|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/dense-fp8-checks.log" | cut -c1-150
python3 benchmarks/experiments/dense_curve_steps.py "$OUT"/dense-fp8-curve-h*.json 2>&1 | tail -8
