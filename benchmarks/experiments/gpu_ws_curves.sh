#!/usr/bin/env bash
# GPU: the sparse decode with the planner pricing the warp-specialized sm_90 kernel. Part 1: its GPU tests, the
# batch-invariance tests, the batch-invariant cost and the CSA/HCA h=64 s_q=1 and CSA h=64 s_q=2 b = 1..256 curves
# (median of 5). Part 2: the other three curves (HCA h=64 s_q=2, CSA/HCA h=128) and compute-sanitizer memcheck and
# racecheck over the warp-specialized kernel's GPU tests.
#   BUDGET=560 bash benchmarks/experiments/gpu_ws_curves.sh SHA 1|2   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-560}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
PART=${2:-1}
curve() {  # curve MODE HEADS S_Q
  step 130 python3 -m wavemla.cli bench --mode "$1" --s-q "$3" --heads "$2" --batch $(seq 1 256) --reps 5 \
    --json "$OUT/curve_$1_h$2_s$3.json" --label "$SHA"
}
CS="compute-sanitizer --error-exitcode 99"
T="python3 -m pytest -q -p no:cacheprovider tests/kernels/test_sparse_decode_ws.py -k gpu"
{
machine "$SHA"
if [ "$PART" = 1 ]; then
  step 150 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_sparse_decode_ws.py \
    tests/kernels/test_batch_invariance.py
  step 80 python3 benchmarks/bi_cost.py --reps 10 --batch 1 32 64 96 128 133 148 200 256 --json "$OUT/bi_cost.json"
  curve csa 64 1; curve hca 64 1; curve csa 64 2
else
  curve hca 64 2; curve csa 128 1; curve hca 128 1
  step 100 $CS --tool memcheck $T
  step 120 $CS --tool racecheck --racecheck-report hazard $T -k "gpu_matches and csa-b8"
fi
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_curves_$PART.log"
grep -E "^== |passed|failed|ERROR SUMMARY|RACECHECK SUMMARY|^mode|^csa  |^hca  |ceilings| b(1|8|32|64|96|128|133|148|256) " \
  "$OUT/ws_curves_$PART.log" | cut -c1-160
