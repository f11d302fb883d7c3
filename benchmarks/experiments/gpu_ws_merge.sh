#!/usr/bin/env bash
# GPU: tokens cut between the warp-specialized kernel's programs merged in the kernel (WAVEMLA_SPARSE_WS_MERGE).
# The sparse GPU tests (the merge cases, its bits against the combine's, counts back to zero under graph replay),
# partitions timed with the merge in the kernel and through the combine kernel (partition_sweep.py, :merge=on/off,
# for the planner's fit), the planner's picks under both, bi_cost.py, then `wavemla stress` over plans that cut tokens
# (default and batch-invariant, HCA and CSA, 3,000 replays each, bitwise against eager calls).
#   BUDGET=540 bash benchmarks/experiments/gpu_ws_merge.sh SHA   (writes ws_merge.{log,json}, bi_cost.json under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-540}
. "$(dirname "$0")/../budget.sh"
T=64x64x8x1
pts=()
add() {  # add SHAPE B UPP...: each partition with the merge in the kernel and through the combine
  local shape=$1 b=$2; shift 2
  for u in "$@"; do pts+=("$shape:$b:$T:$u:merge=on" "$shape:$b:$T:$u:merge=off"); done
  pts+=("$shape:$b:default:merge=auto" "$shape:$b:default:merge=off")
}
add csa 148 12 11
add csa 133 11
add csa 200 16
add csa 64 5 6
add csa 32 3 4 5
add csa 16 1 2
add csa 8 1
add hca 148 21
add hca 133 19
add hca 64 9
add hca 16 3
add csa-s2 96 15
add csa-h128 96 15
{
machine "${1:-}"
step 170 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_sparse_decode_ws.py \
  tests/kernels/test_batch_invariance.py tests/kernels/test_determinism.py tests/kernels/test_combine.py
step 200 python3 benchmarks/experiments/partition_sweep.py --reps 15 --json "$OUT/ws_merge.json" --points "${pts[@]}"
step 80 python3 benchmarks/bi_cost.py --reps 10 --batch 32 64 128 133 148 200 --json "$OUT/bi_cost.json"
for m in hca csa; do
  step 45 python3 -m wavemla.cli stress --mode $m --batch 8 67 133 148 --replays 3000
  step 45 python3 -m wavemla.cli stress --mode $m --batch-invariant --batch 8 67 133 162 --replays 3000
done
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_merge.log"
grep -E "^== |passed|failed|mismatch|MISMATCH|ERROR" "$OUT/ws_merge.log" | cut -c1-160
grep -E " b=" "$OUT/ws_merge.log" | cut -c1-130
