#!/usr/bin/env bash
# The indexer's select kernels launched behind the kernel before them (programmatic dependent launch), against the
# package, in one call: the variant written by idx_pdl_variant.py, whole calls of both (idx_ab.py: FP8 page-split
# rows and queries, top-512, the planner's select path, CUDA graph behind the 256 MB flush, two alternated rounds,
# indices compared) at 32K rows for b = 8, 32, 64, 128 (and at 256K rows for b = 32 with LONG=1); then, with
# TEST_PATHS (a space-separated list), those tests natively on the GPU; then, with VARIANT_TESTS=1, the indexer's
# tests run on the variant (copied over this checkout's kernels/indexer.py: run it on a throwaway copy).
# Output under $OUT: pdl.log, idx-pdl-ab.json, tests.log, variant-tests.log.
#   OUT=/some/dir [TEST_PATHS="tests/kernels/test_x.py ..."] [VARIANT_TESTS=1] \
#     bash benchmarks/experiments/gpu_idx_pdl.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-400}
source benchmarks/budget.sh
SHAPES="8:32768 32:32768 64:32768 128:32768"
[ "${LONG:-0}" = 1 ] && SHAPES="$SHAPES 32:262144"
{
  machine "${1:-unknown}"
  python3 benchmarks/experiments/idx_pdl_variant.py
  step 200 python3 benchmarks/experiments/idx_ab.py "$OUT/idx-pdl-ab.json" benchmarks/experiments/variants/indexer_pdl.py \
    $SHAPES
  if [ -n "${TEST_PATHS:-}" ]; then
    read -r -a SELECT <<< "$TEST_PATHS"
    step 170 python3 -m pytest "${SELECT[@]}" -q $X -p no:cacheprovider > "$OUT/tests.log" 2>&1
    tail -4 "$OUT/tests.log"
  fi
  if [ "${VARIANT_TESTS:-0}" = 1 ]; then
    cp benchmarks/experiments/variants/indexer_pdl.py src/wavemla/kernels/indexer.py
    step 250 python3 -m pytest tests/kernels/test_indexer.py -q $X -p no:cacheprovider > "$OUT/variant-tests.log" 2>&1
    tail -4 "$OUT/variant-tests.log"
  fi
} 2>&1 | quiet | tee "$OUT/pdl.log" | tail -30
