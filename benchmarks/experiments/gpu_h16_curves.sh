#!/usr/bin/env bash
# The four 16-head sparse decode curves (CSA and HCA, s_q 1 and 2, b = 1..256, median of 5), then the points whose
# timing looks disturbed (curve_retime.py spikes) timed again (median of 9), twice at most, and merged in.
# Output under $OUT: h16_curves.log, curve_*_h16_s*.json (re-timed records merged; the first ones under "superseded").
#   OUT=/some/dir bash benchmarks/experiments/gpu_h16_curves.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
SHA=${1:-}
{
  machine "$SHA"
  for c in "csa 1" "hca 1" "csa 2" "hca 2"; do
    set -- $c
    curve 85 "$1" 16 "$2"
  done
  for round in 1 2; do
    for c in "csa 1" "hca 1" "csa 2" "hca 2"; do
      set -- $c
      f="$OUT/curve_$1_h16_s$2.json"
      again="$OUT/retime${round}_$1_h16_s$2.json"
      b=$(python3 benchmarks/experiments/curve_retime.py spikes "$f")
      [ -z "$b" ] && continue
      # shellcheck disable=SC2086
      step 60 python3 -m wavemla.cli bench --mode "$1" --s-q "$2" --heads 16 --batch $b --reps 9 --json "$again" \
        --label "${SHA:-unknown}" && python3 benchmarks/experiments/curve_retime.py merge "$f" "$again"
    done
  done
} 2>&1 | quiet > "$OUT/h16_curves.log"
grep -E "re-timed|Error|error" "$OUT/h16_curves.log" | cut -c1-150
python3 benchmarks/experiments/curve_steps.py "$OUT"/curve_*.json
for f in "$OUT"/curve_*.json; do echo "$(basename "$f") still disturbed: $(python3 benchmarks/experiments/curve_retime.py spikes "$f")"; done
grep "^== " "$OUT/h16_curves.log" | grep -v "^== exit 0" | cut -c1-120
