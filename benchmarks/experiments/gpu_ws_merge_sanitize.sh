#!/usr/bin/env bash
# GPU: compute-sanitizer over the warp-specialized kernel's in-kernel merge of cut tokens (the test cases that merge
# in the kernel: three pieces a token, two query tokens with two head blocks): memcheck, then racecheck.
#   BUDGET=300 bash benchmarks/experiments/gpu_ws_merge_sanitize.sh SHA   (writes ws_merge_sanitize.log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-300}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 110 compute-sanitizer --error-exitcode 99 --tool memcheck python3 -m pytest -q -p no:cacheprovider \
  tests/kernels/test_sparse_decode_ws.py -k "gpu_matches and (merge-splits3 or merge-s2-h128)"
step 150 compute-sanitizer --error-exitcode 99 --tool racecheck --racecheck-report hazard python3 -m pytest -q \
  -p no:cacheprovider tests/kernels/test_sparse_decode_ws.py -k "gpu_matches and merge-splits3"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_merge_sanitize.log"
grep -E "^== |passed|failed|ERROR SUMMARY|RACECHECK SUMMARY|Race reported|hazard" "$OUT/ws_merge_sanitize.log" | sort | uniq -c | sort -rn | head -20 | cut -c1-200
