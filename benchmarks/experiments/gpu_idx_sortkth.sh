#!/usr/bin/env bash
# The k-th list key by an in-register sort (lists of up to block_list keys) instead of radix passes, on one GPU: the
# indexer's GPU tests, the spread-select sanitizer check, then the per-token and spread selects timed at the shapes
# where the select weighs most (benchmarks/experiments/idx_select.py --shapes). Output under $OUT. Ran on 1168815
# (the sort in _list_kth; not kept: within 1 µs of the radix passes, 2026-11-30-h200-idx-sortkth.log).
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_sortkth.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-420}
source benchmarks/budget.sh
echo "commit ${1:-unknown}"
F='Warning[:(]|warner\('
step 150 python3 -m pytest tests/kernels/test_indexer.py -m gpu -q -p no:cacheprovider $X 2>&1 | grep -v -E "$F" \
  | tail -3 | tee "$OUT/idx_sortkth-tests.log"
step 100 compute-sanitizer --error-exitcode 3 --tool racecheck --racecheck-report hazard \
  python3 benchmarks/experiments/idx_spread_check.py 2>&1 | grep -v -E "$F" | tee "$OUT/idx_sortkth-racecheck.log"
step 200 python3 benchmarks/experiments/idx_select.py "$OUT/idx_select.json" --reps 15 --shapes 32:32768:fp8-paged \
  64:32768:fp8-paged 128:32768:fp8-paged 32:262144:fp8-paged 32:32768:bf16 1:32768:fp8-paged 16:32768:fp8-paged \
  32:2048:fp8-paged 128:2048:fp8-paged 2>&1 | grep -v -E "$F" | grep -v GiB | tee "$OUT/idx_select.log"
