#!/usr/bin/env bash
# GPU: the h=64 s_q=1 picks that a dearer 64x32 FP8 tile in the sm_90 table (tile 3.4 µs, from 3.2) would move,
# old (64x32) against new (64x64) partition alternated in one run, each checked against the fp64 reference.
#   BUDGET=150 bash benchmarks/experiments/gpu_round_tile32.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-150}
. "$(dirname "$0")/../budget.sh"
A=64x64x8x1; B=64x32x8x1
P=""
for b in 25 26; do P="$P csa:$b:$B:4 csa:$b:$A:2"; done
for b in 19 20 21; do P="$P hca:$b:$B:6 hca:$b:$A:3"; done
for b in 23 24 25; do P="$P hca:$b:$B:7 hca:$b:$A:4"; done
for b in 30 31 32 33; do P="$P hca:$b:$B:9 hca:$b:$A:6"; done
{
machine "${1:-}"
step 130 python3 benchmarks/experiments/partition_sweep.py --reps 10 --points $P --json "$OUT/tile32_ab.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/tile32.log"
grep -E "^== |ERROR|MISMATCH| us  pred" "$OUT/tile32.log" | cut -c1-150
