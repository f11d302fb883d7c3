#!/usr/bin/env bash
# GPU: where a dense warp-specialized program's time goes (benchmarks/experiments/dense_ws_phases.py: %globaltimer
# stamps in a copy of the kernel; h = 64, b = 8..128 at 4K and b = 32 at 16K). Output under $OUT: dense-phases.log.
#   bash benchmarks/experiments/gpu_dense_phases.sh SHA
set -uo pipefail
BUDGET=${BUDGET:-200}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 180 python3 benchmarks/experiments/dense_ws_phases.py
} 2>&1 | grep -v -E "Warning[:(]|warner\(" | tee "$OUT/dense-phases.log"
