#!/usr/bin/env bash
# GPU: the warp-specialized sparse kernel (sm_90) over a calibration grid of its partitions (64x64 tiles, CSA and
# HCA at h=64, s_q=1, b = 1..256, several tiles-per-program counts at each batch; each checked against the fp64
# reference, CUDA graph, L2 flushed, median of 15), the batch-invariance GPU tests and the batch-invariant cost with
# it. Feeds the planner's warp-specialized tile and segment costs (fit_sm90.py --ws).
#   BUDGET=560 bash benchmarks/experiments/gpu_ws_grid.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-560}
. "$(dirname "$0")/../budget.sh"
A=64x64x8x1
P=""
for x in 1:1 1:2 1:5 1:10 2:1 2:5 4:2 4:5 8:2 8:5 12:3 12:5 16:2 16:3 16:5 24:2 24:5 32:3 32:5 40:4 40:5 48:4 48:5 \
  56:5 64:5 66:5 67:6 67:10 80:7 80:10 96:8 96:10 112:10 128:10 132:10 133:11 133:20 140:11 148:12 148:20 159:13 \
  176:15 199:16 199:20 224:20 256:20; do P="$P csa:${x%%:*}:$A:${x##*:}"; done
for x in 1:1 1:2 1:6 1:9 4:2 4:6 8:2 8:3 16:3 17:3 32:5 32:6 34:5 48:7 64:9 66:9 67:10 80:11 96:14 128:18 133:19 \
  148:21 256:36; do P="$P hca:${x%%:*}:$A:${x##*:}"; done
{
machine "${1:-}"
step 290 python3 benchmarks/experiments/partition_sweep.py --reps 15 --points $P --json "$OUT/ws_grid.json"
step 120 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_batch_invariance.py
step 120 python3 benchmarks/bi_cost.py --reps 10 --batch 1 32 64 96 128 133 148 200 256 --json "$OUT/bi_cost_ws.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_grid.log"
echo "points: $(grep -c ' us ' "$OUT/ws_grid.log")  errors: $(grep -c ERROR "$OUT/ws_grid.log")  mismatches: $(grep -c MISMATCH "$OUT/ws_grid.log")"
grep -E "^== |passed|failed|^mode|^csa  |^hca  |Error" "$OUT/ws_grid.log" | cut -c1-200
