#!/usr/bin/env bash
# GPU: the warp-specialized sparse decode checked against the fp64 reference and the Triton kernel, then timed
# against it at the FlashMLA anchor shapes (sparse_ws_ab.py).
#   [QUICK=1] BUDGET=420 bash benchmarks/experiments/gpu_sparse_ws.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 200 python3 benchmarks/experiments/sparse_ws_ab.py check
step 240 python3 benchmarks/experiments/sparse_ws_ab.py time ${QUICK:+--quick} --json "$OUT/sparse_ws_ab.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/sparse_ws.log"
grep -E "^== |^ok |^BAD|check:|ceilings|^mode|^csa|^hca|Error|error" "$OUT/sparse_ws.log" | cut -c1-220
