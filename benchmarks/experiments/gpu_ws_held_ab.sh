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
# one file for the eight runs (a call brings back few files)
python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
parts = sorted(glob.glob(os.path.join(out, "ab_*.json")))
records = []
for f in parts:
    tree, mode, rnd = os.path.basename(f)[3:-5].split("_")
    records += [{**r, "tree": tree, "round": int(rnd)} for r in json.load(open(f))["records"] if r["provider"] == "wavemla"]
json.dump({"records": records}, open(os.path.join(out, "ws_held_ab.json"), "w"), indent=1)
for f in parts:
    os.remove(f)
PY
grep -E "^== |^csa  |^hca  " "$OUT/ws_held_ab.log" | cut -c1-100
