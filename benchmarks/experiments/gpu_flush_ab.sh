#!/usr/bin/env bash
# The L2 flush A/B (benchmarks/experiments/flush_ab.py: dirty, clean and no flush between replays) and the spread
# select's CSA stress under CUDA graphs. Output under $OUT: stress-spread.log, flush_ab.{json,log}.
#   OUT=/some/dir bash benchmarks/experiments/gpu_flush_ab.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
machine "${1:-unknown}"
F='Warning[:(]|warner\('
step 200 python3 -m pytest tests/tools/test_stress.py -m gpu -k indexer-spread -q -p no:cacheprovider 2>&1 \
  | grep -v -E "$F" | tail -4 | tee "$OUT/stress-spread.log"
step 300 python3 benchmarks/experiments/flush_ab.py "$OUT/flush_ab.json" --reps 15 2>&1 | grep -v -E "$F" \
  | tee "$OUT/flush_ab.log"
