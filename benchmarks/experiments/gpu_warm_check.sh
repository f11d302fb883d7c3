#!/usr/bin/env bash
# The benchmarks' warm-up (timing_samples_us: untimed calls behind the flush for WARM_MS and WARM_CALLS) checked
# where 3 untimed calls left the first timed calls slow: dense_first_case.py and idx_first_case.py (each round should
# now give the settled time), `wavemla bench --dense` bf16 h = 16 at b = 32 and 128 with 4K and 16K keys, the
# indexer benchmark over its b >= 32, n_comp >= 32K cases of FP8 page-split rows with FP8 queries and bf16 rows
# at 32K, and the bench GPU tests.
# Output under $OUT: warm.log, first_case.json, idx_first_case.json, dense_warm.json, idx_warm.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_warm_check.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-400}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  step 60 python3 benchmarks/experiments/dense_first_case.py --json "$OUT/first_case.json"
  step 90 python3 benchmarks/experiments/idx_first_case.py --json "$OUT/idx_first_case.json"
  step 60 python3 -m wavemla.cli bench --dense --heads 16 --kv-formats bf16 --batch 32 128 --seqlen 4096 16384 \
    --reps 15 --json "$OUT/dense_warm.json"
  step 150 python3 -c "
import sys
from wavemla.tools.bench_indexer import IndexerBenchCase, run_indexer_bench
cases = [IndexerBenchCase(b=b, n_comp=n, kv_format='fp8-paged', q_format='fp8') for n in (32768, 262144) for b in (32, 64, 128)]
cases += [IndexerBenchCase(b=b, n_comp=32768, kv_format='bf16') for b in (32, 64)]
for r in run_indexer_bench(sys.argv[1], cases=cases):
    print(r['provider'], r.get('b'), r.get('n_comp'), r.get('kv_format'), r.get('q_format'), round(r['median_us'], 1), 'us', round(r.get('pct_of_copy_bw') or 0, 1), '% of copy')
" "$OUT/idx_warm.json"
  step 40 python3 -m pytest tests/tools/test_bench.py -q -p no:cacheprovider
} 2>&1 | quiet > "$OUT/warm.log"
grep -v -E "^torch |^commit |^import|^from|^cases|^for r|^    print|^\" " "$OUT/warm.log" | cut -c1-220 | tail -50
