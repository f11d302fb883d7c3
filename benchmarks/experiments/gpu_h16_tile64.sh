#!/usr/bin/env bash
# 16 heads at larger batches: the staged FP8 tile over 64 rows (16x64x4x2: two programs an SM, 113 KB each; 16x64x4x3:
# one, 150 KB) against the planner's staged 16x32x4x3 plans (partition_sweep.py: CUDA graph, L2 flushed, median of
# 15, every output checked against the fp64 reference). A 64-row tile halves the per-tile work that does not grow
# with its rows (the accumulator's rescale, the loop's bookkeeping). Output under $OUT: h16_tile64.{log,json}.
#   OUT=/some/dir bash benchmarks/experiments/gpu_h16_tile64.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-300}
source benchmarks/budget.sh
A=16x64x4x2
B=16x64x4x3
POINTS=${POINTS:-"csa-h16:256:default csa-h16:256:$A:10 csa-h16:256:$B:20
  csa-h16:128:default csa-h16:128:$A:5 csa-h16:128:$B:10
  csa-h16:64:default csa-h16:64:$A:3
  hca-h16:256:default hca-h16:256:$A:18 hca-h16:256:$B:35
  hca-h16:128:default hca-h16:128:$A:9"}
{
  machine "${1:-unknown}"
  # the planner knows no 64-row 16-head tile: its compiled resources go into the cache first, else it estimates them
  step 60 python3 -c "
from wavemla.plan import KernelConfig
from wavemla.resources import compile_resources
for r in compile_resources([KernelConfig(16, 64, 4, 2), KernelConfig(16, 64, 4, 3)], [90]):
    print(r.block_h, r.block_n, r.num_warps, r.num_stages, r.smem_bytes, 'B shared', r.regs, 'regs', r.stack_bytes, 'B stack')"
  step 280 python3 benchmarks/experiments/partition_sweep.py --points $POINTS --reps 15 --json "$OUT/h16_tile64.json"
} 2>&1 | quiet | tee "$OUT/h16_tile64.log" | tail -30
