#!/usr/bin/env bash
# What bounds the warp-specialized sparse kernel's tile (benchmarks/experiments/ws_bounds.py): the package's kernel
# and its copies without row loads, without the e4m3 decode, without wgmma, and without both, at the planner's plans.
# Usage: bash benchmarks/experiments/gpu_ws_bounds.sh SHA   (writes under $OUT)
set -uo pipefail
OUT=${OUT:-$PWD/ws-bounds-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/ws-bounds.log"
echo "commit ${1:-unlabelled}" | tee -a "$OUT/ws-bounds.log"
timeout "${LIMIT:-420}" python3 benchmarks/experiments/ws_bounds.py --points ${POINTS:-csa:128 csa:256 hca:128 hca:256} \
  ${VARIANTS:+--variants $VARIANTS} --reps "${REPS:-15}" --json "$OUT/ws-bounds.json" 2>&1 | tee -a "$OUT/ws-bounds.log"
# e.g. VARIANTS="control nomath noexchange nomma" POINTS="csa:128 csa:256 hca:256"
