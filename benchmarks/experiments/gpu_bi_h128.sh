#!/usr/bin/env bash
# GPU: batch-invariant CSA at h=128 (two head blocks), whose pieces per token the merged piece's new price moves
# from 1 (whole tokens, never merged) to 2 at b <= 132: bi_cost.py (median of 10) on the tree before (under
# build/oldsrc, carried with the call) and on this one, b = 32, 64, 96, 128; one JSON of both.
#   git archive 89703cf src/wavemla | tar -x -C build/oldsrc; bash benchmarks/experiments/gpu_bi_h128.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/gpu-lane-out}
for tree in old new; do
  src=$PWD/src; [ "$tree" = old ] && src=$PWD/build/oldsrc/src
  PYTHONPATH=$src timeout 110 python3 benchmarks/bi_cost.py --mode csa --heads 128 --reps 10 --batch 32 64 96 128 \
    --json "$OUT/bi_$tree.json" 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once"
done
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = []
for tree in ("old", "new"):
    f = os.path.join(out, f"bi_{tree}.json")
    if os.path.exists(f):
        rows += [{**r, "tree": tree} for r in json.load(open(f))["records"]]
        os.remove(f)
json.dump({"records": rows}, open(os.path.join(out, "bi_h128.json"), "w"), indent=1)
PY
