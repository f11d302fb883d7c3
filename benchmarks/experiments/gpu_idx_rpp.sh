#!/usr/bin/env bash
# Rows per score program of the lightning indexer (idx_rpp.py): whole calls and the score kernel alone at FP8 32K
# rows, b = 1..128, and b = 32 at 256K rows, for the package's choice and wave-sized alternatives. Output under $OUT:
# idx-rpp.{json,log}.
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_rpp.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-300}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  step 240 python3 benchmarks/experiments/idx_rpp.py "$OUT/idx-rpp.json" 8:32768 32:32768 64:32768 \
    128:32768 32:262144
} 2>&1 | quiet | tee "$OUT/idx-rpp.log" | tail -50
