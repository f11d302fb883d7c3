#!/usr/bin/env bash
# The sparse prefill's checks on the GPU: its GPU tests, the demo's prefill step, and compute-sanitizer memcheck and
# racecheck over every tile that fits the GPU (benchmarks/sanitize_prefill.py).
# Output under $OUT: prefill-check.log, sanitizers.log, sanitizers.txt.
#   OUT=/some/dir bash benchmarks/experiments/gpu_prefill_check.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
SHA=${1:-unknown}
{
  machine "$SHA"
  step 200 python3 -m pytest tests/kernels/test_sparse_prefill.py tests/test_flash_mla.py tests/tools/test_demo.py \
    tests/test_plan_prefill.py tests/tools/test_bench_prefill.py -q -p no:cacheprovider $X -k "prefill or sparse_fwd"
  step 120 python3 -m wavemla.cli demo --prefill
  SANITIZERS="memcheck-prefill racecheck-prefill" RACECHECK_LIMIT=220 step 400 bash benchmarks/sanitizers.sh
} 2>&1 | tee "$OUT/prefill-check.log"
echo "== table"
grep -E "passed|failed|prefill|max err|OK|FAIL" "$OUT/prefill-check.log" | tail -30
