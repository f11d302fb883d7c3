#!/usr/bin/env bash
# What bounds the 16-head sparse decode's staged 16x32 FP8 tiles (benchmarks/experiments/staged_bounds.py): the
# package's kernel and its copies without row loads and without dots, at the planner's 16-head plans.
# Usage: bash benchmarks/experiments/gpu_staged_bounds.sh SHA   (POINTS, VARIANTS, REPS; writes under $OUT)
set -uo pipefail
OUT=${OUT:-$PWD/staged-bounds-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/staged-bounds.log"
echo "commit ${1:-unlabelled}" | tee -a "$OUT/staged-bounds.log"
timeout "${LIMIT:-300}" python3 benchmarks/experiments/staged_bounds.py --points ${POINTS:-csa:128 csa:256 hca:256} \
  ${VARIANTS:+--variants $VARIANTS} --reps "${REPS:-15}" --json "$OUT/staged-bounds.json" 2>&1 \
  | tee -a "$OUT/staged-bounds.log"
