#!/usr/bin/env bash
# Cases timed right after their inputs are allocated: the dense grid's first case after a new pool
# (dense_first_case.py --more: after a rebuild, no warm-up, a 1 s sleep, five reads of the pool, replays until
# stable, and b = pool) and the indexer benchmark's cases (idx_first_case.py: FP8 page-split rows with FP8 queries,
# 32K rows, b = 32 and 64, four rounds in a row, then after a rebuild and a 1 s sleep); then `wavemla bench --dense`
# bf16 h = 16 at b = 32 and 128 with 4K and 16K keys, and the indexer benchmark's FP8 page-split rows with FP8
# queries at b = 32 and 64, 32K rows, with the GPU tests of bench.py. Run at fc34cf0, whose benchmarks read their new
# inputs once and slept 1 s before timing them (`settle_fresh_inputs`, removed after this run showed it changed
# nothing); the probes' timing is the benchmarks' own, which warms each call up under load since.
# Output under $OUT: first_case2.log, first_case_more.json, idx_first_case.json, dense_settled.json, idx_settled.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_first_case.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-330}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  step 120 python3 benchmarks/experiments/dense_first_case.py --more --json "$OUT/first_case_more.json"
  step 100 python3 benchmarks/experiments/idx_first_case.py --json "$OUT/idx_first_case.json"
  step 60 python3 -m wavemla.cli bench --dense --heads 16 --kv-formats bf16 --batch 32 128 --seqlen 4096 16384 \
    --reps 15 --json "$OUT/dense_settled.json"
  step 90 python3 -c "
import sys
from wavemla.tools.bench_indexer import IndexerBenchCase, run_indexer_bench
cases = [IndexerBenchCase(b=b, n_comp=32768, kv_format='fp8-paged', q_format='fp8') for b in (32, 64)]
for r in run_indexer_bench(sys.argv[1], cases=cases):
    print(r['provider'], r.get('b'), r.get('n_comp'), round(r['median_us'], 1), 'us', round(r.get('pct_of_copy_bw') or 0, 1), '% of copy')
" "$OUT/idx_settled.json"
  step 40 python3 -m pytest tests/tools/test_bench.py -q -p no:cacheprovider
} 2>&1 | quiet > "$OUT/first_case2.log"
grep -v -E "^torch |^commit " "$OUT/first_case2.log" | cut -c1-220 | tail -40
