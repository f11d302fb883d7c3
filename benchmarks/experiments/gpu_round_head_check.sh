#!/usr/bin/env bash
# GPU: the build as committed, checked end to end within one call: the whole GPU test lane (stress tests alone
# after it), the demo, stress (10,000 replays), the h=64 s_q=1 anchor tables (median of 30, FlashMLA beside) and
# the batch-invariant cost at b = 32, 64, 128, 148, 256.
#   BUDGET=500 bash benchmarks/experiments/gpu_round_head_check.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-500}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
{
machine "${1:-}"
SKIP_BENCH=1 step 240 bash benchmarks/gpu_lane.sh "${1:-unlabelled}"
step 40 $W demo
step 45 $W stress
step 110 $W bench --mode csa hca --s-q 1 --heads 64 --batch 1 8 32 48 64 80 96 128 148 256 --reps 30 \
  --json "$OUT/bench_h64.json" --label "${1:-unlabelled}"
step 60 python3 benchmarks/bi_cost.py --batch 32 64 128 148 256 --reps 15 --json "$OUT/bi_cost.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/head_check.log"
grep -E "^== |passed|failed|error|result|mismatch|ceilings|^(csa|hca) |ratio" "$OUT/head_check.log" | cut -c1-170
