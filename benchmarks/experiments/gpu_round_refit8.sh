#!/usr/bin/env bash
# GPU: the sm_90 64x64/64x32 FP8 tile costs re-chosen over the measured partitions (fit_tiles.py): the picks they move
# at s_q=2 and h=128, old against new partition alternated in one run (partition_sweep.py, shapes hca-s2, hca-h128,
# csa-h128; the h=64 s_q=1 moves are in -tile32-ab.json), then every moved batch benchmarked with the new planner.
#   BUDGET=330 bash benchmarks/experiments/gpu_round_refit8.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-330}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
A=64x64x8x1; B=64x32x8x1
P=""
for s in hca-s2 hca-h128; do
  P="$P $s:12:$B:7 $s:12:$A:4"
  for b in 15 16; do P="$P $s:$b:$B:9 $s:$b:$A:6"; done
  for b in 184 187; do P="$P $s:$b:$A:51 $s:$b:$A:54"; done
done
P="$P hca-s2:185:$A:51 hca-s2:185:$A:54"
for b in 172 175 178; do P="$P csa-h128:$b:$A:27 csa-h128:$b:$A:30"; done
{
machine "${1:-}"
step 130 python3 benchmarks/experiments/partition_sweep.py --reps 10 --points $P --json "$OUT/refit8_ab.json"
step 30 $W bench --mode hca --s-q 1 --heads 64 --batch 21 23 24 25 30 31 32 33 --reps 5 \
  --json "$OUT/changed_h64_hca.json" --label "${1:-unlabelled}"
step 30 $W bench --mode hca --s-q 2 --heads 64 --batch 12 15 16 184 185 187 --reps 5 \
  --json "$OUT/changed_s2_hca.json" --label "${1:-unlabelled}"
step 30 $W bench --mode hca --s-q 1 --heads 128 --batch 12 15 16 184 187 --reps 5 \
  --json "$OUT/changed_h128_hca.json" --label "${1:-unlabelled}"
step 30 $W bench --mode csa --s-q 1 --heads 128 --batch 172 175 178 --reps 5 \
  --json "$OUT/changed_h128_csa.json" --label "${1:-unlabelled}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/refit8.log"
grep -E "^== |ERROR|MISMATCH|ceilings| us  pred|^hca |^csa " "$OUT/refit8.log" | cut -c1-150
