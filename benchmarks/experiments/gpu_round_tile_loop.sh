#!/usr/bin/env bash
# GPU: changes to the split kernel's tile loop, each A/B against the launcher's default at DSV4 shapes
# (launch_ab.py: same plan and inputs, CUDA-graph replay, L2 flushed, alternating rounds):
#   prefetch_l2=1  - the next tile's FP8 rows prefetched into L2 while a tile is computed (same bits expected)
#   lazy_rescale=1 - the accumulator rescaled only when a head's maximum grows by more than 2^8 (bits differ)
#   prefetch_segments=1 - (the launcher option of commit fe59ec7) L2 prefetch of the extra list's first tile at each
#                    segment start and of the next segment's first tile (same bits)
#   p_via_ws=1     - P and alpha passed to the PV dot through per-program scratch rows, so that QK^T is laid out
#                    over both warpgroups instead of computed in each (reduction order changes: bits may differ)
#   BUDGET=400 bash benchmarks/experiments/gpu_round_tile_loop.sh SHA [OPTION SETS...]   (writes under $OUT)
# The option sets default to the first three rounds' ("prefetch_l2=1" "lazy_rescale=1" "prefetch_l2=1 lazy_rescale=1").
set -uo pipefail
BUDGET=${BUDGET:-400}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
shift || true
[ $# -gt 0 ] || set -- "prefetch_l2=1" "lazy_rescale=1" "prefetch_l2=1 lazy_rescale=1"
P=${POINTS:-"csa:64:1:64 csa:128:1:64 csa:133:1:64 csa:256:1:64 hca:64:1:64 hca:128:1:64 csa:96:2:64 csa:96:1:128 \
csa:128:1:64:2 hca:32:1:64:2 csa:8:1:64 csa:128:1:16"}
{
machine "$SHA"
for kw in "$@"; do
  tag=$(echo "$kw" | tr ' =' '_-')
  step 120 python3 benchmarks/experiments/launch_ab.py "$OUT/tile_loop_$tag.json" --kw $kw --points $P
done
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/tile_loop.log"
grep -E "^== |bits|Error" "$OUT/tile_loop.log" | cut -c1-190
