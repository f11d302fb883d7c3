#!/usr/bin/env bash
# GPU: the combine kernel's share of default-plan sparse decode calls with cut tokens (combine_share.py).
#   bash benchmarks/experiments/gpu_combine_share.sh   (writes combine_share.{log,json} under $OUT)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader > "$OUT/combine_share.log"
timeout 170 python3 benchmarks/experiments/combine_share.py --json "$OUT/combine_share.json" 2>&1 \
  | grep -v -E "Warning[:(]|warner\(|warn_once" | tee -a "$OUT/combine_share.log"
