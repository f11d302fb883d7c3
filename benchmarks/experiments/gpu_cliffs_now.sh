#!/usr/bin/env bash
# FlashMLA's cliffs on one build: the sparse decode at s_q = 2 and at h = 128 (CSA; HCA beside it), b = 64 and 96,
# where FlashMLA's H200 time jumps (45.5 -> 84.5 µs at s_q = 2, 53.4 -> 93.2 at h = 128), and h = 64 at b = 128 and
# 148 (45.8 -> 69.3). `wavemla bench`, median of 15, the planner's plans. Output under $OUT: cliffs.log and
# cliffs_{s2,h128,h64}.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_cliffs_now.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-240}
source benchmarks/budget.sh
W="python3 -m wavemla.cli bench --reps 15 --label ${1:-unknown}"
{
  machine "${1:-unknown}"
  step 80 $W --mode csa hca --s-q 2 --batch 64 96 --json "$OUT/cliffs_s2.json"
  step 80 $W --mode csa hca --heads 128 --batch 64 96 --json "$OUT/cliffs_h128.json"
  step 60 $W --mode csa hca --batch 128 148 --json "$OUT/cliffs_h64.json"
} 2>&1 | quiet | tee "$OUT/cliffs.log" | tail -30
