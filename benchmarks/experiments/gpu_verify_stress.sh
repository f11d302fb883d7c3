#!/usr/bin/env bash
# The shipped build under load, in one call: `wavemla stress` at its defaults (CSA with the indexer in the graphs,
# 64 heads, b = 48, 7, 96, 1, 10,000 replays on two streams); the same decode work over caches of several sizes
# (pool_size.py); `wavemla bench` at two batches (on any card but an H200 it shows no FlashMLA anchor); then, as the
# budget allows, stress at HCA past the perfect fit, batch-invariant plans with cut tokens and the 16-head plans the
# fine-cut rule moved (fewer replays each). Output under $OUT: verify.log, pool_size.json, bench.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_verify_stress.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
W="python3 -m wavemla.cli"
{
  machine "${1:-unknown}"
  step 200 $W stress
  step 150 python3 benchmarks/experiments/pool_size.py "$OUT/pool_size.json"
  step 60 $W bench --batch 1 64 --reps 10 --json "$OUT/bench.json" --label "${1:-unknown}"
  step 80 $W stress --mode hca --batch 133 148 200 16 --replays 4000
  step 60 $W stress --batch-invariant --batch 133 67 162 8 --replays 3000
  step 60 $W stress --heads 16 --batch 21 26 133 200 --replays 3000
} 2>&1 | quiet > "$OUT/verify.log"
grep -E "^== |result:|FlashMLA|^csa|^hca|^dense |^sparse " "$OUT/verify.log" | cut -c1-160
