#!/usr/bin/env bash
# GPU: the split kernel's staged FP8 tiles (num_stages > 1: index entries a chunk at a time, raw rows staged by
# Triton's pipeliner, a row's seven nope blocks apart) against its register-decoded tiles (num_stages 1) at the same
# partitions: the sparse GPU tests, then partition_sweep.py at h = 16 (CSA, HCA) and at h = 64 in 16-head tiles (the
# tiles parts without the warp-specialized kernel run), each partition checked against the fp64 reference.
#   BUDGET=540 bash benchmarks/experiments/gpu_sparse_staged.sh SHA   (writes sparse_staged.{log,json} under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-540}
. "$(dirname "$0")/../budget.sh"
pts=()
add() {  # add SHAPE B UPP: the planner's plan, then 16x32 tiles register-decoded and staged at UPP tiles a program
  local shape=$1 b=$2 u=$3
  pts+=("$shape:$b:default" "$shape:$b:16x32x4x1:$u" "$shape:$b:16x32x4x3:$u" "$shape:$b:16x32x8x3:$u"
        "$shape:$b:16x32x4x2:$u" "$shape:$b:16x16x4x3:$((2 * u))")
}
for bu in 8:1 32:4 64:5 128:10 256:20; do add csa-h16 "${bu%%:*}" "${bu##*:}"; done
for bu in 8:2 32:6 64:9 128:18 256:36; do add hca-h16 "${bu%%:*}" "${bu##*:}"; done
pts+=("csa:32:16x32x4x1:10" "csa:32:16x32x4x3:10" "csa:128:16x32x4x1:40" "csa:128:16x32x4x3:40")
{
machine "${1:-}"
step 200 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_sparse_decode.py
step 330 python3 benchmarks/experiments/partition_sweep.py --reps 15 --json "$OUT/sparse_staged.json" --points "${pts[@]}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/sparse_staged.log"
grep -E "^== |passed|failed|mismatch|MISMATCH|ERROR" "$OUT/sparse_staged.log" | cut -c1-160
grep -E " b=" "$OUT/sparse_staged.log" | cut -c1-130
