#!/usr/bin/env bash
# GPU: the kernel tests (sparse, dense, combine, indexer, determinism, batch invariance, numerics) and `wavemla demo`
# on the final tree of the dense combine and planner round.
#   BUDGET=300 bash benchmarks/experiments/gpu_round_close.sh   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-300}
. "$(dirname "$0")/../budget.sh"
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step 220 python3 -m pytest tests/kernels tests/test_plan_dense.py tests/test_main.py -q $X -p no:cacheprovider --tb=short
step 60 python3 -m wavemla demo
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/close.log"
grep -E "^== |passed|failed|^E |PASS|FAIL" "$OUT/close.log" | cut -c1-160
