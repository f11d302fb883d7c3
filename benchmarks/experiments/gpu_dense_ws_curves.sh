#!/usr/bin/env bash
# GPU: the dense planner's bf16 picks over b = 1..128 at s_k 4K, h = 64 and 128 (the warp-specialized sm_90 kernel
# from a few requests on, a part per request just under the part count), per-request steps above 5%; and the dense
# hostile-input tests on the GPU.
#   BUDGET=420 bash benchmarks/experiments/gpu_dense_ws_curves.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 60 python3 -m pytest -q -p no:cacheprovider -n 16 tests/test_hostile_dense.py
for h in 64 128; do
  step 170 python3 -m wavemla.cli bench --dense --kv-formats bf16 --heads $h --batch $(seq -s ' ' 1 128) \
    --seqlen 4096 --lengths uniform --reps 5 --json "$OUT/dense_ws_curve_h$h.json" --label "${1:-unknown}"
done
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_ws_curves.log"
grep -E "^== |passed|failed|ceilings" "$OUT/dense_ws_curves.log" | cut -c1-170
python3 benchmarks/experiments/dense_curve_steps.py "$OUT"/dense_ws_curve_h*.json | tee -a "$OUT/dense_ws_curves.log"
