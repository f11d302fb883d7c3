# Large-cache decode, address translation against DRAM locality (pool_size.py): the same CSA calls with each
# request's 512 picks over 2,048 rows of its own (0.15 GB cache), over 65,536-131,072 rows (4.9 GB) and over 32
# pages of those rows (the same 4.9 GB cache, the compact case's page count). Output: $OUT/pool_pages.{json,log}.
#   bash benchmarks/experiments/gpu_pool_pages.sh SHA
SHA=${1:-unknown}
BUDGET=${BUDGET:-420}
source benchmarks/budget.sh
{
  machine "$SHA"
  step 400 python3 benchmarks/experiments/pool_size.py "$OUT/pool_pages.json" --no-dense \
    --sparse 128:2048 128:65536 128:65536:32 64:2048 64:131072 64:131072:32
} 2>&1 | quiet | tee "$OUT/pool_pages.log"
