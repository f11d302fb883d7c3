#!/usr/bin/env bash
# GPU: the planner with the warp-specialized kernel's in-kernel merge of cut tokens (WAVEMLA_SPARSE_WS_MERGE=auto):
# the batches whose H200 plan moved (changed_batches.py) and the cut-token batches where FlashMLA has its cliffs,
# timed by `wavemla bench` (median of 5, like the curves) as planned and with the knob off (the combine kernel), in
# alternating order; then the warp-specialized kernel's GPU tests and `wavemla stress` over default plans that cut.
#   BUDGET=420 bash benchmarks/experiments/gpu_ws_merge_final.sh SHA   (writes changed-*.json, merge-*.json under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
bench() {  # bench NAME MODE S_Q HEADS BATCHES...
  local name=$1 mode=$2 s=$3 h=$4; shift 4
  step 60 python3 -m wavemla.cli bench --mode "$mode" --s-q "$s" --heads "$h" --batch "$@" --reps 5 \
    --json "$OUT/$name.json" --label "$SHA"
}
{
machine "$SHA"
python3 benchmarks/experiments/changed_batches.py | while read -r mode h s bs; do
  bench "changed-h$h$([ "$s" = 2 ] && echo -s2)$([ "$mode" = hca ] && echo -hca)" "$mode" "$s" "$h" $bs
done
for round in 1 2; do
  for m in csa hca; do
    bench "merge-h64-$m-auto-$round" $m 1 64 133 148 200
    WAVEMLA_SPARSE_WS_MERGE=off bench "merge-h64-$m-off-$round" $m 1 64 133 148 200
  done
done
step 120 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_sparse_decode_ws.py
step 40 python3 -m wavemla.cli stress --mode csa --batch 133 148 200 --replays 3000
step 40 python3 -m wavemla.cli stress --mode hca --batch 133 148 200 --replays 3000
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_merge_final.log"
grep -E "^== |passed|failed|result|mismatch|^csa  |^hca  | b(133|148|200|249) " "$OUT/ws_merge_final.log" | cut -c1-150
