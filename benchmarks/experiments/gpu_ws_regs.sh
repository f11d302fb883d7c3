#!/usr/bin/env bash
# The warp-specialized sparse kernel's register split: its GPU tests (warp-specialized, batch invariance, launch
# replays) on the package's split, then the package against other splits in one run (ws_bounds.py, regs:MxG).
# Usage: bash benchmarks/experiments/gpu_ws_regs.sh SHA   (VARIANTS, POINTS as gpu_ws_bounds.sh; writes under $OUT)
set -uo pipefail
OUT=${OUT:-$PWD/ws-regs-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
echo "commit ${1:-unlabelled}" | tee "$OUT/ws-regs.log"
timeout "${TEST_LIMIT:-170}" python3 -m pytest tests/kernels/test_sparse_decode_ws.py tests/kernels/test_batch_invariance.py \
  tests/kernels/test_launch.py -q -n 12 -p no:cacheprovider 2>&1 | tail -3 | tee -a "$OUT/ws-regs.log"
OUT=$OUT LIMIT=${LIMIT:-120} bash benchmarks/experiments/gpu_ws_bounds.sh "${1:-unlabelled}" > /dev/null 2>&1
tee -a "$OUT/ws-regs.log" < "$OUT/ws-bounds.log"
