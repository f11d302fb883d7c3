#!/usr/bin/env bash
# wavemla's sparse decode against SGLang's two Triton DeepSeek-V4 decodes (engines_ab.py), on the GPU present: the
# native code path (CSA and HCA, h = 64 and 16, b = 1..128), then Triton's sm_120 code path
# (TRITON_OVERRIDE_ARCH=sm120), once with the planner's configuration for this GPU's memory and once with the one it
# picks on every SM12x preset (16x32x4x1). SGDIR is a folder holding an unpacked SGLang wheel's sglang/ (only the
# kernel modules engines_ab.py names are read; nothing of it is part of wavemla), e.g.
#   pip download --no-deps sglang==0.5.23 -d /tmp/w && unzip -q /tmp/w/sglang-*.whl 'sglang/kernels/*' -d SGDIR
# and travels with the call (an ignored folder of the checkout). Output under $OUT: engines.log, engines-*.json.
#   SGDIR=.engines OUT=/some/dir bash benchmarks/experiments/gpu_engines.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-570}
source benchmarks/budget.sh
E=benchmarks/experiments/engines_ab.py
{
  machine "$1"
  step 330 python3 $E "$OUT/engines-native.json" --sglang "$SGDIR"
  export TRITON_OVERRIDE_ARCH=sm120
  step 120 python3 $E "$OUT/engines-sm120-planner.json" --sglang "$SGDIR" --points csa:1 csa:8 csa:32 csa:64 \
    csa:128 hca:64 csa-h16:8 csa-h16:64 hca-h16:64
  step 100 env WAVEMLA_BLOCK_H=16 WAVEMLA_BLOCK_N=32 WAVEMLA_NUM_WARPS=4 python3 $E \
    "$OUT/engines-sm120-16x32.json" --sglang "$SGDIR" --points csa:8 csa:32 csa:64 csa:128 hca:64 hca:128
} 2>&1 | tee "$OUT/engines.log"
