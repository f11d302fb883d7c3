#!/usr/bin/env bash
# GPU: the split kernels' 64-head tiles with 16 warps per program (4 warpgroups: 4 warps per scheduler instead of
# 2, 128 registers a thread) against the shipped 8, same tile and partition (sparse) or the planner's re-plan with
# the warp knob (dense); fp64-reference checked (sparse) or compared with the 8-warp output (dense).
#   bash benchmarks/experiments/gpu_round_warps.sh LABEL   (writes under $OUT)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=${1:-dev}
P=()
for pt in csa:32 csa:64 csa:128 csa:148 hca:64 hca:128 csa-s2:96 csa-h128:96; do
  P+=("$pt:default" "$pt:default:warps=16")
done
timeout 330 python3 benchmarks/experiments/partition_sweep.py --reps 20 --json "$OUT/warps-sparse-$L.json" \
  --points "${P[@]}" 2>&1 | grep -v -i warn | tee "$OUT/warps-$L.log"
timeout 200 python3 benchmarks/experiments/dense_variant_ab.py "$OUT/warps-dense-$L.json" --variants - warps=16 \
  --points bf16:64:32:4096 bf16:64:128:16384 bf16:128:128:4096 fp8:64:128:4096 fp8:128:32:4096 \
  2>&1 | grep -v -i warn | tee -a "$OUT/warps-$L.log"
