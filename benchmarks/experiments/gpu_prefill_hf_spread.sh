#!/usr/bin/env bash
# The sparse prefill's short-call pieces, transformers' prefill through wavemla.hf_attention and the decode's spread
# plans on one GPU in one call: the prefill's GPU tests (the hostile-input property test with pieces among them), the
# benchmark's short and long cases, hf_prefill.py, then spread_ab.py at the 22 spread points of the H200 curves.
# Output under $OUT: catchup.log, prefill.json, hf-prefill.json, spread_ab.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_prefill_hf_spread.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-570}
source benchmarks/budget.sh
SHA=${1:-unknown}
{
  machine "$SHA"
  step 150 python3 -m pytest tests/kernels/test_sparse_prefill.py tests/test_plan_prefill.py -q -p no:cacheprovider $X
  step 120 python3 -m wavemla.tools.bench_prefill --json "$OUT/prefill.json" --label "$SHA" --reps 15 \
    --cases dsv4-h64-s16 dsv4-h64-s100 dsv4-h16-s64 v32-h16-s32 dsv4-h64
  step 100 python3 benchmarks/experiments/hf_prefill.py --tokens 1024 4096 --json "$OUT/hf-prefill.json"
  step 230 python3 benchmarks/experiments/spread_ab.py "$OUT/spread_ab.json" --rounds 3 --reps 10
} 2>&1 | quiet > "$OUT/catchup.log"
echo "== table"
grep -E "^commit|H[12]00|passed|failed|wavemla|torch /|ceilings|sliding|csa|hca|== exit|skipped" "$OUT/catchup.log" \
  | cut -c1-160 | tail -70
