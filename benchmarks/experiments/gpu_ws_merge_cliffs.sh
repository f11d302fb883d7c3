#!/usr/bin/env bash
# GPU: FlashMLA's other two cliff shapes (CSA s_q=2 and h=128 at b=96) timed by `wavemla bench` as planned (the
# warp-specialized kernel merging its cut tokens itself) and with WAVEMLA_SPARSE_WS_MERGE=off (the combine kernel).
#   BUDGET=150 bash benchmarks/experiments/gpu_ws_merge_cliffs.sh SHA   (writes cliffs-*.json under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-150}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
for knob in auto off; do
  WAVEMLA_SPARSE_WS_MERGE=$knob step 40 python3 -m wavemla.cli bench --mode csa --s-q 2 --heads 64 --batch 96 \
    --reps 15 --json "$OUT/cliffs-s2-$knob.json" --label "$SHA"
  WAVEMLA_SPARSE_WS_MERGE=$knob step 40 python3 -m wavemla.cli bench --mode csa --s-q 1 --heads 128 --batch 96 \
    --reps 15 --json "$OUT/cliffs-h128-$knob.json" --label "$SHA"
done 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once"
