#!/usr/bin/env bash
# Dense decode on one GPU: its GPU tests, then a tile-configuration sweep at DeepSeek-V3 shapes (the planner's choice
# plus forced ones), JSON and logs under $OUT. One call: bash benchmarks/dense_gpu.sh LABEL
set -uo pipefail
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
LABEL=${1:-unlabelled}
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
W="python3 -m wavemla.cli"
step() { local limit=$1; shift; echo "== $* (limit ${limit}s)"; timeout "$limit" "$@"; echo "== exit $?"; }
{
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  step 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_dense_decode.py tests/reference/test_dense_decode_ref.py
  step ${SWEEP_LIMIT:-150} $W bench --dense --kv-formats bf16 --batch 32 128 --seqlen 4096 16384 --heads 16 64 128 \
    --lengths uniform --reps 10 --configs ${BF16_CONFIGS:-16x32x4x3 16x32x4x2 16x64x4x2 16x16x4x3 32x32x8x3 64x32x8x3 64x16x8x3} \
    --json "$OUT/sweep_bf16.json" --label "$LABEL"
  step ${SWEEP_LIMIT:-150} $W bench --dense --kv-formats fp8 --batch 32 128 --seqlen 4096 --heads 16 64 128 \
    --lengths uniform --reps 10 --configs ${FP8_CONFIGS:-16x32x8x1 16x32x4x1 16x64x8x1 32x32x8x1 64x32x8x1} \
    --json "$OUT/sweep_fp8.json" --label "$LABEL"
} > "$OUT/dense.log" 2>&1
grep -E "^== |passed|failed|Error|ceilings" "$OUT/dense.log" | head -40
grep -E "^dense" "$OUT/dense.log" | cut -c1-160
