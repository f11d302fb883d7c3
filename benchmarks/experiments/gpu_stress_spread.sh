#!/usr/bin/env bash
# The staged-FP8-tile alignment test (launched through Triton's path), the stress tests alone, then the spread
# plans against the uniform ones at the 22 spread points, in one call. Output under $OUT: stress_spread.log,
# spread_ab.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_stress_spread.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-570}
source benchmarks/budget.sh
SHA=${1:-unknown}
{
  machine "$SHA"
  step 90 python3 -m pytest "tests/kernels/test_sparse_decode.py::test_fp8_staged_tiles_need_8_byte_aligned_pages" \
    -q -p no:cacheprovider
  step 240 python3 -m pytest tests/tools/test_stress.py -q -p no:cacheprovider -p no:xdist
  step 230 python3 benchmarks/experiments/spread_ab.py "$OUT/spread_ab.json" --rounds 3 --reps 10
} 2>&1 | quiet > "$OUT/stress_spread.log"
echo "== table"
grep -E "^commit|H[12]00|passed|failed|torch /|csa|hca|== exit|skipped" "$OUT/stress_spread.log" | cut -c1-160 | tail -60
