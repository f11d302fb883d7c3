#!/usr/bin/env bash
# GPU: (1) the GPU lane's tests that a cut lane left unrun (LANE_DONE: a file of the test ids that ran, one per
# line; the rest of the collected ids run now, every worker native) and the stress tests alone; (2) the sparse
# decode at the batches whose plan moved when the planner began counting a cut token's pieces exactly
# (HCA h=64 s_q=1, s_q=2, h=128).
#   LANE_DONE=done.txt BUDGET=480 bash benchmarks/experiments/gpu_round_exact.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-480}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
{
machine "${1:-}"
if [ -n "${LANE_DONE:-}" ]; then
  python3 -m pytest --collect-only -q tests --ignore=tests/tools/test_stress.py -p no:cacheprovider 2>/dev/null \
    | grep "::" | sort -u > "$OUT/lane_all.txt"
  sort -u "$LANE_DONE" | comm -23 "$OUT/lane_all.txt" - > "$OUT/lane_todo.txt"
  echo "lane: $(wc -l < "$OUT/lane_all.txt") collected, $(wc -l < "$OUT/lane_todo.txt") not yet run"
  N=$(wc -l < "$OUT/lane_todo.txt"); [ "$N" -gt 16 ] && N=16
  [ "$N" -gt 0 ] && step 260 xargs -d '\n' -a "$OUT/lane_todo.txt" python3 -m pytest -v -n "$N" -p no:cacheprovider
fi
step 150 python3 -m pytest tests/tools/test_stress.py -v -p no:cacheprovider -p no:xdist
step 40 $W bench --mode hca --s-q 1 --heads 64 --batch 26 $(seq 74 80) $(seq 96 110) --reps 5 \
  --json "$OUT/changed_h64_hca.json" --label "${1:-unlabelled}"
step 30 $W bench --mode hca --s-q 2 --heads 64 --batch 13 $(seq 37 40) $(seq 48 55) --reps 5 \
  --json "$OUT/changed_s2_hca.json" --label "${1:-unlabelled}"
step 30 $W bench --mode hca --s-q 1 --heads 128 --batch 13 $(seq 37 40) $(seq 48 55) --reps 5 \
  --json "$OUT/changed_h128_hca.json" --label "${1:-unlabelled}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/exact.log"
grep -E "^== |^lane|passed|failed|FAILED|ERROR|ceilings|^hca " "$OUT/exact.log" | cut -c1-150
