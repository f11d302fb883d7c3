#!/usr/bin/env bash
# DeepSeek-V3.2's sparse decode (q 576 wide) through the sparse call: its tests and the API's on the GPU, then
# v32_sparse_bench.py (h = 128, 2048 entries, b = 1..128, s_q = 1 and 2). Output under $OUT: v32.log, v32.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_v32_sparse.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-420}
source benchmarks/budget.sh
F='Warning[:(]|warner\(|_warn_once'
{
  machine "${1:-unknown}"
  step 150 python3 -m pytest tests/test_sparse_v32.py tests/test_api.py tests/reference -q -p no:cacheprovider $X
  step 240 python3 benchmarks/experiments/v32_sparse_bench.py --json "$OUT/v32.json"
} 2>&1 | grep -v -E "$F" > "$OUT/v32.log"
cat "$OUT/v32.log"
