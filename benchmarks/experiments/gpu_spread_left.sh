#!/usr/bin/env bash
# The spread partition (whole tokens first, the leftover spread) past a perfect fit by 3 to 8 leftover query tokens,
# where the model prices it cheaper than the uniform partition once offered that far (spread_ab.py --max-left 8),
# against the uniform plan and the batch before; then the s_q=2 and h=128 curves (CSA and HCA, b = 1..256, median of
# 5) of the planner's plans. Output under $OUT: spread_left.log, spread_left.json, curve_*.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_spread_left.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
SHA=${1:-}
POINTS="csa:135 csa:136 csa-s2:68 csa-s2:134 csa-h128:69 csa-h128:73 csa-h128:135 hca:135 hca-s2:134 hca-h128:69
  hca-h128:74"
curve() {  # curve MODE HEADS S_Q
  step 120 python3 -m wavemla.cli bench --mode "$1" --s-q "$3" --heads "$2" --batch $(seq 1 256) --reps 5 \
    --json "$OUT/curve_$1_h$2_s$3.json" --label "$SHA"
}
{
  machine "$SHA"
  # shellcheck disable=SC2086
  step 150 python3 benchmarks/experiments/spread_ab.py "$OUT/spread_left.json" --points $POINTS --max-left 8 \
    --rounds 3 --reps 10
  curve csa 64 2
  curve hca 64 2
  curve csa 128 1
  curve hca 128 1
} 2>&1 | quiet > "$OUT/spread_left.log"
grep -E "spread/uniform" "$OUT/spread_left.log"
python3 - "$OUT" <<'PY'
import glob, json, os, sys
for path in sorted(glob.glob(f"{sys.argv[1]}/curve_*.json")):
    recs = sorted((r for r in json.load(open(path))["records"] if r["provider"] == "wavemla"), key=lambda r: r["batch"])
    steps = [f"{a['batch']}->{b['batch']} {100 * ((b['median_us'] / b['batch']) / (a['median_us'] / a['batch']) - 1):+.0f}%"
             for a, b in zip(recs, recs[1:]) if (b["median_us"] / b["batch"]) / (a["median_us"] / a["batch"]) > 1.05]
    print(os.path.basename(path), len(recs), "points;", len(steps), "steps > 5%:", ", ".join(steps))
PY
grep "^== " "$OUT/spread_left.log" | grep -v "^== exit 0"
