#!/usr/bin/env bash
# GPU: the shipped warp-specialized dense kernel (QK^T split between its math warpgroups): the dense GPU tests, a
# dense stress run (2,000 CUDA-graph replays on several streams against eager, bitwise), and the bf16 b = 128, 16K
# points of the table.
#   BUDGET=200 bash benchmarks/experiments/gpu_dense_ws_last.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-200}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
{
machine "${1:-}"
step 110 python3 -m pytest -q -p no:cacheprovider -n 16 tests/kernels/test_dense_decode.py tests/kernels/test_dense_decode_ws.py
step 50 $W stress --mode dense --heads 64 --seqlen 4096 --replays 2000
step 40 $W bench --dense --kv-formats bf16 --batch 128 --seqlen 16384 --heads 16 64 128 --lengths uniform --reps 10 \
  --json "$OUT/dense_ws_b128.json" --label "${1:-unknown}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_ws_last.log"
grep -E "^== |passed|failed|mismatch|PASS|FAIL|ceilings|^dense bf16 h" "$OUT/dense_ws_last.log" | cut -c1-165
