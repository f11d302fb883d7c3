#!/usr/bin/env bash
# GPU: the plans that the shared-SM time of the 16x32 FP8 tiles at 16 heads (plan.py, _SHARED_16X32_US) moved. The
# batches of the measured curves whose pick moved (benchmarks/experiments/changed_batches.py: CSA b = 10..13,
# 27..33, 172..184; HCA b = 6, 7, 10, 11, 213..220), run by `wavemla bench` as the curves were (their JSON, committed
# as *-h200-sparse-decode-changed-h16{,-hca}-shared-tile.json, is what tests/test_plan.py checks the picks against);
# then moved plans with 2 query tokens (no measured curve) timed against the plan before in one run
# (partition_sweep.py, median of 15, each checked against the fp64 reference).
#   BUDGET=300 bash benchmarks/experiments/gpu_shared_tile_changed.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-300}
. "$(dirname "$0")/../budget.sh"
B="python3 -m wavemla.cli bench --reps 15 --label ${1:-}"
{
machine "${1:-}"
step 100 $B --mode csa --s-q 1 --heads 16 --batch 10 11 12 13 27 28 29 30 31 32 33 $(seq 172 184) \
  --json "$OUT/changed-h16-shared-tile.json"
step 70 $B --mode hca --s-q 1 --heads 16 --batch 6 7 10 11 $(seq 213 220) --json "$OUT/changed-h16-hca-shared-tile.json"
P=()
ab() { P+=("$1:$2:16x32x4x3:$3" "$1:$2:16x32x4x3:$4"); }  # ab SHAPE B UPP_BEFORE UPP_NOW
ab csa-s2-h16 5 1 2; ab csa-s2-h16 15 4 5; ab csa-s2-h16 88 20 14; ab csa-s2-h16 210 40 32; ab csa-s2-h16 214 40 33
ab hca-s2-h16 3 1 2; ab hca-s2-h16 5 2 3; ab hca-s2-h16 108 36 30; ab hca-s2-h16 233 72 64
step 120 python3 benchmarks/experiments/partition_sweep.py --reps 15 --json "$OUT/shared_tile_other_ab.json" \
  --points "${P[@]}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/shared_tile_changed.log"
grep -E "^== |ceilings| b[0-9]+ | b= *[0-9]+ " "$OUT/shared_tile_changed.log" | cut -c1-150
