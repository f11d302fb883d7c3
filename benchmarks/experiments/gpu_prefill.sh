#!/usr/bin/env bash
# The sparse prefill on the GPU: its GPU tests, then the benchmark (every tile that fits, the PyTorch baseline).
# Output under $OUT: prefill.log, prefill.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_prefill.sh <git-sha> [bench_prefill arguments...]
set -uo pipefail
BUDGET=${BUDGET:-480}
source benchmarks/budget.sh
SHA=${1:-unknown}
shift || true
{
  machine "$SHA"
  step 200 python3 -m pytest tests/kernels/test_sparse_prefill.py tests/test_flash_mla.py -q -p no:cacheprovider $X \
    -k "prefill or sparse_fwd"
  step 300 python3 -m wavemla.tools.bench_prefill --json "$OUT/prefill.json" --label "$SHA" --tiles "$@"
} 2>&1 | tee "$OUT/prefill.log"
echo "== table"
grep -E "passed|failed|TFLOP|torch / wavemla|ceilings" "$OUT/prefill.log" | tail -40
