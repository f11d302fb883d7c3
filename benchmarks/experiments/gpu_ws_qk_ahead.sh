#!/usr/bin/env bash
# QKᵀ issued one tile ahead in the warp-specialized sparse kernel: its GPU tests (warp-specialized, batch
# invariance, launch replays), then an A/B in one run against the build before (the kernel module of commit BASE,
# written by `git show BASE:src/wavemla/kernels/sparse_decode_ws.py > benchmarks/experiments/variants/
# sparse_decode_ws_base.py` and carried), at the planner's plans (benchmarks/experiments/ws_bounds.py).
# Usage: bash benchmarks/experiments/gpu_ws_qk_ahead.sh SHA   (writes under $OUT)
set -uo pipefail
OUT=${OUT:-$PWD/ws-qk-ahead-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/qk-ahead.log"
echo "commit ${1:-unlabelled}" | tee -a "$OUT/qk-ahead.log"
timeout "${TEST_LIMIT:-240}" python3 -m pytest tests/kernels/test_sparse_decode_ws.py tests/kernels/test_batch_invariance.py \
  tests/kernels/test_launch.py -q -n 12 -p no:cacheprovider 2>&1 | tail -6 | tee -a "$OUT/qk-ahead.log"
timeout "${LIMIT:-300}" python3 benchmarks/experiments/ws_bounds.py \
  --variants file:benchmarks/experiments/variants/sparse_decode_ws_base.py \
  --points ${POINTS:-csa:32 csa:64 csa:128 csa:133 csa:256 hca:64 hca:128 hca:256 csa-s2:96 csa-h128:96} \
  --reps "${REPS:-15}" --json "$OUT/qk-ahead.json" 2>&1 | tee -a "$OUT/qk-ahead.log"
