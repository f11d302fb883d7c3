#!/usr/bin/env bash
# GPU: how the benchmarks' L2 flush colours the dense decode (benchmarks/experiments/flush_ab.py --only dense: dirty,
# clean and no flush between CUDA-graph replays; h = 64 b = 8..128 at 4K, b = 32 at 1K..16K, h = 128 b = 32 4K, whole
# calls and calls reusing the schedule). Output under $OUT: dense-flush.{json,log}.
#   bash benchmarks/experiments/gpu_dense_flush.sh SHA
set -uo pipefail
BUDGET=${BUDGET:-300}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 280 python3 benchmarks/experiments/flush_ab.py "$OUT/dense-flush.json" --reps 15 --only dense
} 2>&1 | grep -v -E "Warning[:(]|warner\(" | tee "$OUT/dense-flush.log"
