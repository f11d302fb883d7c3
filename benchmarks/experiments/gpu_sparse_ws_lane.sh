#!/usr/bin/env bash
# GPU: the warp-specialized sparse decode as shipped: its GPU tests and the sparse decode's, the A/B against the
# Triton kernel at the FlashMLA anchor shapes (sparse_ws_ab.py), and the stress (CUDA graphs on two streams against
# eager, bitwise) at batches whose plans run it.
#   BUDGET=330 bash benchmarks/experiments/gpu_sparse_ws_lane.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-330}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 130 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_sparse_decode_ws.py \
  tests/kernels/test_sparse_decode.py
step 110 python3 benchmarks/experiments/sparse_ws_ab.py time --json "$OUT/sparse_ws_ab.json"
step 70 python3 -m wavemla.cli stress --batch 96 128 67 148 --replays 3000
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/sparse_ws_lane.log"
grep -E "^== |passed|failed|mismatch|ceilings|^mode|^csa|^hca|Error" "$OUT/sparse_ws_lane.log" | cut -c1-200
