#!/usr/bin/env bash
# GPU: the dense decode's row-major 64x32 bf16 tiles with P through scratch rows (dense_decode.rows64) against the
# keys-major 64x64x8x2 tile: the dense GPU tests of both paths, then the A/B at DeepSeek-V3 shapes.
#   bash benchmarks/experiments/gpu_dense_rows64.sh SHA   (writes $OUT/dense_rows64.log and .json)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{
echo "commit ${1:-unknown}"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
[ -n "${SKIP_TESTS:-}" ] || timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/kernels/test_dense_decode.py -rf 2>&1 | tail -4
timeout 330 python3 benchmarks/experiments/dense_rows64_ab.py "$OUT/dense_rows64.json" --points \
  bf16:64:128:16384 bf16:64:32:4096 bf16:64:128:4096 bf16:64:32:16384 bf16:128:32:4096 bf16:128:128:16384 \
  bf16:64:8:16384 bf16:64:32:4096:2 2>&1 | grep -v -i warn
} 2>&1 | tee "$OUT/dense_rows64.log"
