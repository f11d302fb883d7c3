#!/usr/bin/env bash
# GPU: the default (non-invariant) plans of the build that merges batch-invariant pieces in their program against the
# build before it (its src tree checked out under build/oldsrc, carried with the call), alternating old/new twice at
# CSA/HCA h=64 b = 8, 64, 128, 256 (median of 5 each; same plans, the planner's default path unchanged).
#   git archive OLD src/wavemla | tar -x -C build/oldsrc; BUDGET=150 bash benchmarks/experiments/gpu_ws_held_ab.sh
set -uo pipefail
BUDGET=${BUDGET:-150}
. "$(dirname "$0")/../budget.sh"
NEW=$PWD/src
OLD=$PWD/build/oldsrc/src
{
for round in 1 2; do
  for tree in old new; do
    src=$NEW; [ "$tree" = old ] && src=$OLD
    for mode in csa hca; do
      echo "== round $round $tree $mode"
      PYTHONPATH=$src timeout 60 python3 -m wavemla.cli bench --mode $mode --heads 64 --batch 8 64 128 256 --reps 5 \
        --json "$OUT/ab_${tree}_${mode}_$round.json" --label "$tree"
    done
  done
done
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_held_ab.log"
grep -E "^== |^csa  |^hca  " "$OUT/ws_held_ab.log" | cut -c1-100
