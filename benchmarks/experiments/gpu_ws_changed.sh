#!/usr/bin/env bash
# GPU: after a change of the planner, the batches whose H200 plan moved (changed_batches.py), each shape's list timed
# by `wavemla bench` (median of 5, like the curves); then the sparse decode GPU tests, the demo and a stress run at
# batches whose plans run the warp-specialized kernel.
#   BUDGET=400 bash benchmarks/experiments/gpu_ws_changed.sh SHA TAG   (writes changed_<shape>-TAG.json under $OUT)
# ONLY_BENCH=1: the timings alone. BI_COST=1: then the batch-invariant cost (bi_cost.py, median of 10) as well.
set -uo pipefail
BUDGET=${BUDGET:-400}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
TAG=${2:-changed}
{
machine "$SHA"
python3 benchmarks/experiments/changed_batches.py | while read -r mode h s bs; do
  name=h$h$([ "$s" = 2 ] && echo -s2)$([ "$mode" = hca ] && echo -hca)
  step 60 python3 -m wavemla.cli bench --mode "$mode" --s-q "$s" --heads "$h" --batch $bs --reps 5 \
    --json "$OUT/changed-$name-$TAG.json" --label "$SHA"
done
if [ -z "${ONLY_BENCH:-}" ]; then
  step 150 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_sparse_decode.py \
    tests/kernels/test_sparse_decode_ws.py tests/kernels/test_determinism.py
  step 40 python3 -m wavemla.cli demo
  step 60 python3 -m wavemla.cli stress --batch 8 67 133 162 --replays 3000
fi
if [ -n "${BI_COST:-}" ]; then
  step 80 python3 benchmarks/bi_cost.py --reps 10 --batch 1 32 64 96 128 133 148 200 256 --json "$OUT/bi_cost-$TAG.json"
fi
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_changed.log"
grep -E "^== |passed|failed|result|mismatch|ceilings|^csa  |^hca  |^mode| b(1|32|64|96|128|133|148|200|256) " "$OUT/ws_changed.log" | cut -c1-150
