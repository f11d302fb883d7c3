#!/usr/bin/env bash
# The six 64- and 128-head sparse decode curves (CSA and HCA; h=64 s_q=1 and 2, h=128 s_q=1; b = 1..256, median of 5,
# the planner's plans) in one call, and their per-request steps above 5%. Output under $OUT: curves6.log,
# curve_{mode}_h{heads}_s{s_q}.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_curves6.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-500}
source benchmarks/budget.sh
SHA=${1:-}
curve() {  # curve MODE HEADS S_Q
  step 90 python3 -m wavemla.cli bench --mode "$1" --s-q "$3" --heads "$2" --batch $(seq 1 256) --reps 5 \
    --json "$OUT/curve_$1_h$2_s$3.json" --label "$SHA"
}
{
  machine "$SHA"
  for mode in csa hca; do curve $mode 64 1; curve $mode 64 2; curve $mode 128 1; done
} 2>&1 | quiet > "$OUT/curves6.log"
python3 - "$OUT" <<'PY'
import glob, json, os, sys
for path in sorted(glob.glob(f"{sys.argv[1]}/curve_*.json")):
    recs = sorted((r for r in json.load(open(path))["records"] if r["provider"] == "wavemla"), key=lambda r: r["batch"])
    steps = [f"{a['batch']}->{b['batch']} {100 * ((b['median_us'] / b['batch']) / (a['median_us'] / a['batch']) - 1):+.0f}%"
             for a, b in zip(recs, recs[1:]) if (b["median_us"] / b["batch"]) / (a["median_us"] / a["batch"]) > 1.05]
    print(os.path.basename(path), len(recs), "points;", len(steps), "steps > 5%:", ", ".join(steps))
PY
grep "^== " "$OUT/curves6.log" | grep -v "^== exit 0" | cut -c1-120
