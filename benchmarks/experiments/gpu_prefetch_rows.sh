#!/usr/bin/env bash
# The 32-row FP8 tile's next-tile gather, into registers (the default), into L2 only, or not at all
# (prefetch_rows_ab.py, the 16x32x4x1 tile pinned): along Triton's sm_120 code path with two programs an SM (as an
# sm_120 part's occupancy floor gives; TRITON_OVERRIDE_ARCH=sm120, WAVEMLA_TARGET_CTAS = 2 x SMs), then natively.
# Output under $OUT: prefetch_rows.log, prefetch_rows_{sm120,native}.json. Runs on commit 0cdadc5 (the launcher's
# prefetch_rows keyword, removed after).
#   OUT=/some/dir bash benchmarks/experiments/gpu_prefetch_rows.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-420}
source benchmarks/budget.sh
SLOTS=$(python3 -c "import torch; print(2 * torch.cuda.get_device_properties(0).multi_processor_count)")
{
  machine "${1:-unknown}"
  TRITON_OVERRIDE_ARCH=sm120 WAVEMLA_TARGET_CTAS=$SLOTS step 250 python3 benchmarks/experiments/prefetch_rows_ab.py \
    "$OUT/prefetch_rows_sm120.json" --tile 16x32x4x1 \
    --points csa:8 csa:32 csa:64 csa:128 hca:32 hca:64 csa-h16:32 csa-h16:128
  step 150 python3 benchmarks/experiments/prefetch_rows_ab.py "$OUT/prefetch_rows_native.json" --tile 16x32x4x1 \
    --points csa-h16:8 csa-h16:32 hca-h16:32 csa:8 csa:32
} 2>&1 | quiet | tee "$OUT/prefetch_rows.log" | tail -50
