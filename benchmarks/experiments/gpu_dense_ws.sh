#!/usr/bin/env bash
# GPU: the dense decode's warp-specialized Gluon split kernel (kernels/dense_decode_ws.py) against the Triton
# keys-major tile: a smoke check, the dense GPU tests (the Gluon kernel runs wherever it applies), then the A/B at
# DeepSeek-V3 shapes.
#   bash benchmarks/experiments/gpu_dense_ws.sh SHA   (writes $OUT/dense_ws.log and .json)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{
echo "commit ${1:-unknown}"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
timeout 120 python3 benchmarks/experiments/dense_ws_ab.py --points bf16:64:4:1000 --rounds 1 --reps 3 2>&1 | grep -v -i warn
[ -n "${SKIP_TESTS:-}" ] || timeout 240 python3 -m pytest -q -p no:cacheprovider -n 8 tests/kernels/test_dense_decode.py -rf 2>&1 | tail -8
timeout ${AB_TIMEOUT:-300} python3 benchmarks/experiments/dense_ws_ab.py "$OUT/dense_ws.json" ${VARIANTS:+--variants $VARIANTS} --points ${POINTS:-\
  bf16:64:128:16384 bf16:64:32:4096 bf16:64:128:4096 bf16:64:32:16384 bf16:128:32:4096 bf16:128:128:16384 \
  bf16:64:8:16384 bf16:64:32:4096:2} 2>&1 | grep -v -i warn
} 2>&1 | tee "$OUT/dense_ws.log"
