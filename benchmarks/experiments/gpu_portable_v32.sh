#!/usr/bin/env bash
# The plans an RTX PRO 6000 (sm_120, 99 KB of shared memory a block) and an A100 (sm_80) make, run on this GPU along
# their architectures' code paths (TRITON_OVERRIDE_ARCH, with WAVEMLA_GPU naming the card, so that the planner's
# limits are that card's and not this GPU's): DeepSeek-V3.2's sparse decode (its tests, `wavemla demo --v32`,
# v32_sparse_bench.py at b = 32 and 128), and `wavemla demo` for DeepSeek-V4 and for the FP8 V3.2 dense decode.
# Timings are this GPU's SMs running another architecture's instructions: they check the path, they predict no
# card's time. Output under $OUT: portable-v32.log, v32-<arch>.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_portable_v32.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  for pair in sm120:rtx-pro-6000 sm80:a100; do
    arch=${pair%%:*}
    export TRITON_OVERRIDE_ARCH=$arch WAVEMLA_GPU=${pair#*:}
    echo "#### TRITON_OVERRIDE_ARCH=$TRITON_OVERRIDE_ARCH WAVEMLA_GPU=$WAVEMLA_GPU"
    step 120 python3 -m pytest tests/test_sparse_v32.py tests/kernels/test_v32_lists.py -q -p no:cacheprovider $X -rf
    step 60 python3 -m wavemla demo --v32
    step 45 python3 -m wavemla demo
    step 45 python3 -m wavemla demo --dense --fp8
    step 60 python3 benchmarks/experiments/v32_sparse_bench.py --batch 32 128 --s-q 1 --reps 10 \
      --json "$OUT/v32-$arch.json"
    unset TRITON_OVERRIDE_ARCH WAVEMLA_GPU
  done
} 2>&1 | quiet > "$OUT/portable-v32.log"
cut -c1-220 "$OUT/portable-v32.log"
