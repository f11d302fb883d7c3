#!/usr/bin/env bash
# Large-cache decode, address translation against DRAM locality (pool_size.py): the same CSA calls with each
# request's 512 picks over 2,048 rows of its own (0.08-0.15 GB cache), over 65,536-131,072 rows (4.9 GB) and over
# 32 pages of those rows (the same 4.9 GB cache, the compact case's page count). Then, as the budget allows, the
# current build's 64-head anchor table (`wavemla bench`; FlashMLA's anchors show only on an H200) and its
# batch-invariant cost (bi_cost.py). Output under $OUT: pool_pages.{json,log}, bench.json, bi_cost.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_pool_pages.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  step 200 python3 benchmarks/experiments/pool_size.py "$OUT/pool_pages.json" --no-dense \
    --sparse 128:2048 128:65536 128:65536:32 64:2048 64:131072 64:131072:32
  step 150 python3 -m wavemla.cli bench --reps 15 --json "$OUT/bench.json" --label "${1:-unknown}"
  step 160 python3 benchmarks/bi_cost.py --batch 32 64 96 128 133 148 200 256 --reps 10 --json "$OUT/bi_cost.json"
} 2>&1 | quiet | tee "$OUT/pool_pages.log" | tail -60
