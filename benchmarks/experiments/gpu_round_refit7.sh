#!/usr/bin/env bash
# GPU: a partition grid of the current split kernel (two-piece merge, one-product normalization, merge decision by
# one barrier): 64x64 tiles over the batches where the planner's pick moves between aligned two-piece cuts, cuts
# into three or more pieces, misaligned cuts and whole tokens, plus the 64x32 and 16x32 points beside them; CSA and
# HCA at h=64, s_q=1, FP8, each checked against the fp64 reference and timed (CUDA graph, L2 flushed, median of 10).
# Feeds the merge-cost terms of the sm_90 model (benchmarks/experiments/fit_sm90.py). Then the dense planner's
# b = 1..128 curve at s_k 4K, h=64 (bf16), with the keys-major efficiency of 0.68.
#   BUDGET=480 bash benchmarks/experiments/gpu_round_refit7.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-480}
. "$(dirname "$0")/../budget.sh"
A=64x64x8x1; B=64x32x8x1; C=16x32x4x1
P=""
for x in 28:3 28:4 28:5 33:3 33:5 34:3 34:4 34:5 34:10 39:3 39:5 40:4 40:5 48:4 48:5 48:10 56:5 56:10 64:5 64:10 66:5 67:6 67:7 67:10 72:6 72:10 80:6 80:7 80:10 96:8 96:10 128:10 133:11 133:12 \
  133:20 148:12 148:20 159:13 159:15 159:20 199:16 199:20 256:20; do
  P="$P csa:${x%%:*}:$A:${x##*:}"; done
for x in 28:5 33:5 34:5 34:6; do P="$P csa:${x%%:*}:$B:${x##*:}"; done
for x in 24:4 28:4 28:6 28:9 34:6 34:9 40:6 40:9 45:7 45:9 48:7 48:9 52:9 67:10 67:12 67:18 74:11 74:12 74:18 80:11 \
  80:12 80:18 89:13 89:18 96:14 96:18 133:19 133:27 148:21 148:27; do
  P="$P hca:${x%%:*}:$A:${x##*:}"; done
for x in 12:4 13:4 24:7 24:9 28:9 34:10 45:13; do P="$P hca:${x%%:*}:$B:${x##*:}"; done
for x in 12:6 12:9 13:9 14:9; do P="$P hca:${x%%:*}:$C:${x##*:}"; done
{
machine "${1:-}"
step 330 python3 benchmarks/experiments/partition_sweep.py --reps 10 --points $P --json "$OUT/refit7.json"
step 110 python3 -m wavemla.cli bench --dense --kv-formats bf16 --heads 64 --batch $(seq -s ' ' 1 128) --seqlen 4096 \
  --lengths uniform --reps 5 --json "$OUT/dense_curve_bf16_h64.json" --label "${1:-unknown}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/refit7.log"
echo "points: $(grep -c ' us ' "$OUT/refit7.log")  errors: $(grep -c ERROR "$OUT/refit7.log")  mismatches: $(grep -c MISMATCH "$OUT/refit7.log")"
grep -E "^== |ERROR|MISMATCH|ceilings" "$OUT/refit7.log" | cut -c1-170
