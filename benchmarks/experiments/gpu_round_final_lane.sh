#!/usr/bin/env bash
# GPU: the whole GPU test lane (every test, the stress tests alone after it), the demo and the h=64 s_q=1 anchor
# tables (median of 30, FlashMLA beside) on the current kernel, within a budget.
#   BUDGET=420 bash benchmarks/experiments/gpu_round_final_lane.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
SKIP_BENCH=1 step 240 bash benchmarks/gpu_lane.sh "${1:-unlabelled}"
step 40 $W demo
step 110 $W bench --mode csa hca --s-q 1 --heads 64 --batch 1 8 32 48 64 80 96 128 148 256 --reps 30 \
  --json "$OUT/bench_h64.json" --label "${1:-unlabelled}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/final_lane.log"
grep -E "^== |passed|failed|error|result|mismatch|ceilings|^(csa|hca) " "$OUT/final_lane.log" | cut -c1-170
