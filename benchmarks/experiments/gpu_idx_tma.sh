#!/usr/bin/env bash
# The indexer's score kernel with each 64-row page of FP8 codes fetched as one TMA box (sm_90; the change in
# benchmarks/results/2026-12-07-idx-score-tma-package-c8f30b6.patch, applied to this checkout first: run it on a
# throwaway copy) against the same package with the gathers (a copy of kernels/indexer.py with TMA_SCORE_ARCHS
# empty), whole calls in one run (idx_ab.py: FP8 page-split rows and queries, top-512, the planner's select path,
# CUDA graph behind the 256 MB flush, two alternated rounds, indices compared) at 32K rows for b = 8, 32, 64, 128
# and 256K rows for b = 32, 128; then, with TEST_PATHS (a space-separated list), those tests natively on the GPU.
# Output under $OUT: tma.log, idx-tma-ab.json, tests.log.
#   OUT=/some/dir [TEST_PATHS="tests/kernels/test_x.py ..."] bash benchmarks/experiments/gpu_idx_tma.sh <git-sha>
# (TEST_PATHS with tests/kernels/test_indexer.py runs the patch's own tests as well.)
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
grep -q '^TMA_SCORE_ARCHS' src/wavemla/kernels/indexer.py ||
  patch -p1 -s < benchmarks/results/2026-12-07-idx-score-tma-package-c8f30b6.patch || exit 1
GATHER=$(mktemp -d)/indexer_gather.py
sed 's/^TMA_SCORE_ARCHS = (90,)$/TMA_SCORE_ARCHS = ()/' src/wavemla/kernels/indexer.py > "$GATHER"
{
  machine "${1:-unknown}"
  grep -c '^TMA_SCORE_ARCHS = ()$' "$GATHER" | sed 's/^/gather copy made: /'
  step 270 python3 benchmarks/experiments/idx_ab.py "$OUT/idx-tma-ab.json" "$GATHER" \
    8:32768 32:32768 64:32768 128:32768 32:262144 128:262144
  if [ -n "${TEST_PATHS:-}" ]; then
    read -r -a SELECT <<< "$TEST_PATHS"
    step 240 python3 -m pytest "${SELECT[@]}" -q $X -p no:cacheprovider > "$OUT/tests.log" 2>&1
    grep -E "FAILED|ERROR" "$OUT/tests.log" | head -20
    tail -3 "$OUT/tests.log"
  fi
} 2>&1 | quiet | tee "$OUT/tma.log" | tail -30
