#!/usr/bin/env bash
# GPU: the plans that a shared-SM time for the 16x32 FP8 tiles would move (fit_shared_tile.py --moves 2.9: a launch
# of more programs than SMs priced at 2.9 µs a tile instead of 2.3), each timed at its plan now and at the moved plan
# in one run (median of 15, checked against the fp64 reference); then the staged tiles' remaining checks
# (gpu_sparse_staged_checks.sh: memcheck, 32 heads, the dense FP8 skewed point).
#   BUDGET=400 bash benchmarks/experiments/gpu_shared_tile.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-400}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
P=()
for b in 10 11 12 13; do P+=(csa-h16:$b:16x32x4x3:1 csa-h16:$b:16x32x4x3:2); done
for b in 27 30 33; do P+=(csa-h16:$b:16x32x4x3:4 csa-h16:$b:16x32x4x3:5); done
for b in 172 176 180 184; do P+=(csa-h16:$b:16x32x4x3:20 csa-h16:$b:16x32x4x3:14); done
for b in 6 7; do P+=(hca-h16:$b:16x32x4x3:1 hca-h16:$b:16x32x4x3:2); done
for b in 10 11; do P+=(hca-h16:$b:16x32x4x3:2 hca-h16:$b:16x32x4x3:3); done
for b in 213 216 220; do P+=(hca-h16:$b:16x32x4x3:36 hca-h16:$b:16x32x4x3:30); done
P+=(hca:2:16x32x4x1:2 hca:2:64x64x8x1:1)
step 150 python3 benchmarks/experiments/partition_sweep.py --reps 15 --json "$OUT/shared_tile_ab.json" --points "${P[@]}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/shared_tile.log"
grep -E "^== |ceilings| b= *[0-9]+ " "$OUT/shared_tile.log" | cut -c1-150 | tail -60
BUDGET=$((END - SECONDS)) bash "$(dirname "$0")/gpu_sparse_staged_checks.sh" "${1:-}"
