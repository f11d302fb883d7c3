#!/usr/bin/env bash
# GPU: (1) the HCA h=64 picks that counting a cut token's pieces exactly would move (plan._merge_pieces_bound), old
# against new partition in one run; (2) batch-invariant pieces per token on the current kernel (the measured pair
# of plan._SM90_INVARIANT_MEASURED against 5 pieces for CSA, 3 and 6 for HCA); (3) the batch-invariant cost around
# b = 148, where it misses 1.15.
#   BUDGET=330 bash benchmarks/experiments/gpu_round_pieces.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-330}
. "$(dirname "$0")/../budget.sh"
A=64x64x8x1; B=64x32x8x1
P="hca:26:$B:9 hca:26:$A:4"
for b in 74 77 80; do P="$P hca:$b:$A:11 hca:$b:$A:12"; done
for b in 96 99 102; do P="$P hca:$b:$A:14 hca:$b:$A:15"; done
for b in 103 106 110; do P="$P hca:$b:$A:18 hca:$b:$A:15"; done
Q=""
for b in 64 128 148 256; do
  Q="$Q csa:$b:default csa:$b:default:bi csa:$b:default:bi:splits=5"
  Q="$Q hca:$b:default hca:$b:default:bi hca:$b:default:bi:splits=3 hca:$b:default:bi:splits=6"
done
{
machine "${1:-}"
step 110 python3 benchmarks/experiments/partition_sweep.py --reps 10 --points $P --json "$OUT/exact_pieces_ab.json"
step 110 python3 benchmarks/experiments/partition_sweep.py --reps 10 --points $Q --json "$OUT/bi_pieces.json"
step 90 python3 benchmarks/bi_cost.py --batch 132 136 140 144 148 152 156 160 166 172 180 --reps 10 \
  --json "$OUT/bi_cost_148.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/pieces.log"
grep -E "^== |ERROR|MISMATCH|ceilings| us|^csa|^hca" "$OUT/pieces.log" | cut -c1-150
