#!/usr/bin/env bash
# What bounds the warp-specialized sparse kernel's tile (benchmarks/experiments/ws_bounds.py): the package's kernel
# and its copies with one part of the work taken out (or another build), at the planner's plans.
# BOUNDS=staged runs benchmarks/experiments/staged_bounds.py instead (the 16-head staged FP8 tiles of the Triton
# kernel; default points csa:128 csa:256 hca:256 at 16 heads).
# Usage: bash benchmarks/experiments/gpu_ws_bounds.sh SHA   (POINTS, VARIANTS, REPS, LIMIT, BOUNDS; writes under $OUT)
# e.g. VARIANTS="control nomath noexchange nomma" POINTS="csa:128 csa:256 hca:256"
set -uo pipefail
OUT=${OUT:-$PWD/ws-bounds-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
BOUNDS=${BOUNDS:-ws}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/$BOUNDS-bounds.log"
echo "commit ${1:-unlabelled}" | tee -a "$OUT/$BOUNDS-bounds.log"
timeout "${LIMIT:-420}" python3 "benchmarks/experiments/${BOUNDS}_bounds.py" ${POINTS:+--points $POINTS} \
  ${VARIANTS:+--variants $VARIANTS} --reps "${REPS:-15}" --json "$OUT/$BOUNDS-bounds.json" 2>&1 \
  | tee -a "$OUT/$BOUNDS-bounds.log"
