#!/usr/bin/env bash
# The dense and indexer figures behind their copy-bandwidth aims, timed with the benchmarks' warm-up (50 ms and 10
# calls under load before each timed set): `wavemla bench --dense` bf16 rows at b = 32, 64, 128, 4K and 16K keys,
# 16, 64 and 128 heads (uniform lengths, median of 10), and the indexer benchmark at 32K rows, b = 32, 64, 128
# (FP8 page-split rows with FP8 queries) and b = 32, 64 (bf16 rows), with its torch baseline.
# Output under $OUT: warm_grid.log, dense_grid.json, idx_grid.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_warm_grid.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-300}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  step 150 python3 -m wavemla.cli bench --dense --batch 32 64 128 --seqlen 4096 16384 --heads 16 64 128 \
    --lengths uniform --kv-formats bf16 --reps 10 --json "$OUT/dense_grid.json"
  step 120 python3 -c "
import sys
from wavemla.tools.bench_indexer import IndexerBenchCase, run_indexer_bench
cases = [IndexerBenchCase(b=b, n_comp=32768, kv_format='fp8-paged', q_format='fp8') for b in (32, 64, 128)]
cases += [IndexerBenchCase(b=b, n_comp=32768, kv_format='bf16') for b in (32, 64)]
for r in run_indexer_bench(sys.argv[1], cases=cases):
    print(r['provider'], r.get('b'), r.get('n_comp'), r.get('kv_format'), r.get('q_format'), round(r['median_us'], 1), 'us', round(r.get('pct_of_copy_bw') or 0, 1), '% of copy')
" "$OUT/idx_grid.json"
} 2>&1 | quiet > "$OUT/warm_grid.log"
grep -E "^== |^dense |ceiling|^triton|^torch|^copy" "$OUT/warm_grid.log" | cut -c1-200 | tail -50
