#!/usr/bin/env bash
# GPU: after a change of the planner, the batches whose H200 plan moved (changed_batches.py), each shape's list timed
# by `wavemla bench` (median of 5, like the curves); then the sparse decode GPU tests, the demo and a stress run at
# batches whose plans run the warp-specialized kernel.
#   BUDGET=400 bash benchmarks/experiments/gpu_ws_changed.sh SHA TAG   (writes changed_<shape>-TAG.json under $OUT)
# ONLY_BENCH=1: the timings alone.
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
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_changed.log"
grep -E "^== |passed|failed|result|mismatch|ceilings|^csa  |^hca  " "$OUT/ws_changed.log" | cut -c1-150
