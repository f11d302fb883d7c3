#!/usr/bin/env bash
# GPU: the whole GPU test lane on a cold machine (every test natively, the stress tests alone after it), the demo,
# and the HCA h=64 s_q=1 b = 1..256 curve again (its first run with the merge-priced planner ran with the GPU
# below its usual copy and GEMM ceilings).
#   BUDGET=560 bash benchmarks/experiments/gpu_round_lane_final.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-560}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
SKIP_BENCH=1 step 430 bash benchmarks/gpu_lane.sh "${1:-unlabelled}"
step 35 python3 -m wavemla.cli demo
step 90 python3 -m wavemla.cli bench --mode hca --s-q 1 --heads 64 --batch $(seq 1 256) --reps 5 \
  --json "$OUT/curve_h64_hca.json" --label "${1:-unlabelled}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/lane_final.log"
grep -E "^== |passed|failed|error|result|ceilings" "$OUT/lane_final.log" | cut -c1-170
