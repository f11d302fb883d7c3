#!/usr/bin/env bash
# The sparse prefill with lists cut into pieces for short calls, on the GPU: its GPU tests, the benchmark's short
# cases (the planner's pieces against whole lists) with one long case (whole lists, the build's default path), and
# compute-sanitizer over every tile and a cut plan. Output under $OUT: pieces.log, pieces.json, sanitizers.*.
#   OUT=/some/dir bash benchmarks/experiments/gpu_prefill_pieces.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-420}
source benchmarks/budget.sh
SHA=${1:-unknown}
{
  machine "$SHA"
  step 150 python3 -m pytest tests/kernels/test_sparse_prefill.py tests/test_flash_mla.py tests/test_plan_prefill.py \
    -q -p no:cacheprovider $X -k "prefill or sparse_fwd or pieces or cut or splits"
  step 150 python3 -m wavemla.tools.bench_prefill --json "$OUT/pieces.json" --label "$SHA" --reps 15 \
    --cases dsv4-h64-s16 dsv4-h16-s64 v32-h16-s32 dsv4-h64
  SANITIZERS="memcheck-prefill racecheck-prefill" RACECHECK_LIMIT=150 step 200 bash benchmarks/sanitizers.sh
} 2>&1 | tee "$OUT/pieces.log"
echo "== table"
grep -E "passed|failed|wavemla|torch /|ceilings|prefill  " "$OUT/pieces.log" | tail -24
