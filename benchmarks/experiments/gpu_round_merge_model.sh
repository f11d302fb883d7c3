#!/usr/bin/env bash
# GPU: the planner with the measured merge terms (_MERGE_PAIR_US, _MERGE_US, _MERGE_PIECE_US): the h=64 s_q=1 b = 1..256
# curves (CSA, HCA), the new picks against the old ones at the batches where they differ (partition_sweep.py, same
# run), and the s_q=2 and h=128 batches whose pick changed.
#   BUDGET=300 bash benchmarks/experiments/gpu_round_merge_model.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-300}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
A=64x64x8x1; B=64x32x8x1
P=""
for x in 34:3 34:5 36:3 36:5 39:3 39:5 212:20 212:17 218:20 218:17 224:20 224:17; do P="$P csa:${x%%:*}:$A:${x##*:}"; done
P="$P hca:22:$B:6 hca:22:$A:3 hca:27:$B:9 hca:27:$A:4"
for x in 45:7 45:9 48:7 48:9 51:7 51:9 235:36 235:33 240:36 240:33; do P="$P hca:${x%%:*}:$A:${x##*:}"; done
{
machine "${1:-}"
step 60 python3 benchmarks/experiments/partition_sweep.py --reps 10 --points $P --json "$OUT/merge_model_ab.json"
step 80 $W bench --mode csa --s-q 1 --heads 64 --batch $(seq 1 256) --reps 5 --json "$OUT/curve_h64.json" \
  --label "${1:-unlabelled}"
step 90 $W bench --mode hca --s-q 1 --heads 64 --batch $(seq 1 256) --reps 5 --json "$OUT/curve_h64_hca.json" \
  --label "${1:-unlabelled}"
step 30 $W bench --mode csa --s-q 2 --heads 64 --batch 16 17 18 19 20 105 106 107 108 109 110 111 112 113 232 233 234 235 \
  236 237 --reps 5 --json "$OUT/changed_s2_csa.json" --label "${1:-unlabelled}"
step 30 $W bench --mode hca --s-q 2 --heads 64 --batch 11 23 24 25 118 119 120 121 184 185 187 246 247 248 249 --reps 5 \
  --json "$OUT/changed_s2_hca.json" --label "${1:-unlabelled}"
step 30 $W bench --mode csa --s-q 1 --heads 128 --batch 16 17 18 19 20 106 107 108 109 110 111 112 172 175 178 232 233 \
  234 235 236 237 --reps 5 --json "$OUT/changed_h128_csa.json" --label "${1:-unlabelled}"
step 30 $W bench --mode hca --s-q 1 --heads 128 --batch 11 23 24 25 118 119 120 121 184 187 246 247 248 249 --reps 5 \
  --json "$OUT/changed_h128_hca.json" --label "${1:-unlabelled}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/merge_model.log"
grep -E "^== |ERROR|MISMATCH|ceilings| us  pred" "$OUT/merge_model.log" | cut -c1-150
