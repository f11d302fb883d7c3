#!/usr/bin/env bash
# The indexer's select kernels launched behind the kernel before them (programmatic dependent launch), against the
# package, in one call: the variant written by idx_pdl_variant.py, whole calls of both (idx_ab.py: FP8 page-split
# rows and queries, top-512, CUDA graph behind the 256 MB flush, two alternated rounds, indices compared) at 32K rows
# for b = 8, 32, 64, 128 and at 256K rows for b = 32, then the same with the per-token select at b = 32 and 64.
# Output under $OUT: pdl.log, idx-pdl-ab.json, idx-pdl-ab-token.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_pdl.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-400}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  python3 benchmarks/experiments/idx_pdl_variant.py
  step 200 python3 benchmarks/experiments/idx_ab.py "$OUT/idx-pdl-ab.json" benchmarks/experiments/variants/indexer_pdl.py \
    8:32768 32:32768 64:32768 128:32768 32:262144
  step 100 python3 benchmarks/experiments/idx_ab.py "$OUT/idx-pdl-ab-token.json" \
    benchmarks/experiments/variants/indexer_pdl.py 32:32768 64:32768 --paths token
} 2>&1 | quiet | tee "$OUT/pdl.log" | tail -30
