#!/usr/bin/env bash
# The staged FP8 tile over 16 rows on the sm_120 code path (TRITON_OVERRIDE_ARCH=sm120: mma.sync and cp.async, as
# an RTX PRO 6000 / RTX 5090 runs them): 16x16x4x3 (49.9 KB of shared memory) fits two programs an SM on sm_120's
# 100 KB, where the staged 16x32x4x3 (83 KB) does not; against the register tiles the planner offers there
# (16x32x4x1, 16x16x4x1). Every launch gets the 264 program slots of two programs an SM on the card present
# (WAVEMLA_TARGET_CTAS), as an sm_120 part's occupancy floor gives, and each tile is pinned by the tile knobs (one
# `wavemla bench` a tile: CUDA graph, L2 flushed, the warm-up, median of 10; CONFIGS=... for others, e.g. 16x16x4x2).
# Output under $OUT: sm120_staged.log, sm120_staged_<tile>.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_sm120_staged.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
CONFIGS=${CONFIGS:-16x32x4x1 16x16x4x3 16x16x4x1}
export TRITON_OVERRIDE_ARCH=sm120
SLOTS=$(python3 -c "import torch; print(2 * torch.cuda.get_device_properties(0).multi_processor_count)")
export WAVEMLA_TARGET_CTAS=$SLOTS
{
  machine "${1:-unknown}"
  echo "TRITON_OVERRIDE_ARCH=$TRITON_OVERRIDE_ARCH WAVEMLA_TARGET_CTAS=$SLOTS"
  # the staged 16-row tiles are not in the packaged sm_120 table: their compiled resources go into the cache first
  step 90 python3 -c "
from wavemla.plan import KernelConfig
from wavemla.resources import compile_resources
for r in compile_resources([KernelConfig(16, 16, 4, 3), KernelConfig(16, 16, 4, 2)], [120]):
    print(r.block_h, r.block_n, r.num_warps, r.num_stages, r.smem_bytes, 'B shared', r.regs, 'regs', r.stack_bytes, 'B stack')"
  for cfg in $CONFIGS; do
    IFS=x read -r BH BN NW NS <<< "$cfg"
    WAVEMLA_BLOCK_H=$BH WAVEMLA_BLOCK_N=$BN WAVEMLA_NUM_WARPS=$NW WAVEMLA_NUM_STAGES=$NS \
      step 120 python3 -m wavemla.cli bench --mode csa hca --heads 64 --batch 8 32 64 128 --reps 10 \
      --json "$OUT/sm120_staged_$cfg.json" --label "${1:-unknown} sm120 slots=$SLOTS $cfg"
  done
} 2>&1 | quiet | tee "$OUT/sm120_staged.log" | grep -v "^  " | tail -80
