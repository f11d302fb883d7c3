#!/usr/bin/env bash
# GPU: batch-invariant CSA at h=128 (two head blocks), whose pieces per token the merged piece's new price moves
# from 1 (whole tokens, never merged) to 2 at b <= 132: bi_cost.py (median of 10) on the tree before (under
# build/oldsrc, carried with the call) and on this one, b = 32, 64, 96, 128; one JSON of both (bi_ab.py).
#   git archive 89703cf src/wavemla | tar -x -C build/oldsrc; bash benchmarks/experiments/gpu_bi_h128.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
timeout 230 python3 "$(dirname "$0")/bi_ab.py" "$OUT/bi_h128.json" --mode csa --heads 128 --reps 10 \
  --batch 32 64 96 128 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once"
