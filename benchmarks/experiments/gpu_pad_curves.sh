#!/usr/bin/env bash
# The sparse decode's CSA and HCA h=64 s_q=1 curves (b = 1..256, median of 5, the planner's plans: padded tokens at
# small batches) and the batch-invariant cost against those default plans, on one GPU in one call. Output under $OUT:
# pad_curves.log, curve_{csa,hca}_h64_s1.json, bi_cost.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_pad_curves.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
SHA=${1:-}
curve() {  # curve MODE HEADS S_Q
  step 170 python3 -m wavemla.cli bench --mode "$1" --s-q "$3" --heads "$2" --batch $(seq 1 256) --reps 5 \
    --json "$OUT/curve_$1_h$2_s$3.json" --label "$SHA"
}
{
  machine "$SHA"
  curve csa 64 1
  curve hca 64 1
  step 150 python3 benchmarks/bi_cost.py --reps 10 --batch 32 64 96 128 133 148 200 256 --json "$OUT/bi_cost.json"
} 2>&1 | quiet > "$OUT/pad_curves.log"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
for mode in ("csa", "hca"):
    try:
        recs = [r for r in json.load(open(f"{out}/curve_{mode}_h64_s1.json"))["records"] if r["provider"] == "wavemla"]
    except (OSError, KeyError, ValueError) as exc:
        print(mode, "no curve:", exc)
        continue
    recs.sort(key=lambda r: r["batch"])
    steps = [(a["batch"], b["batch"], 100 * ((b["median_us"] / b["batch"]) / (a["median_us"] / a["batch"]) - 1))
             for a, b in zip(recs, recs[1:])]
    big = [f"{x}->{y} {s:+.0f}%" for x, y, s in steps if s > 5]
    print(mode, len(recs), "points;", len(big), "steps > 5%:", ", ".join(big))
PY
tail -12 "$OUT/pad_curves.log"
