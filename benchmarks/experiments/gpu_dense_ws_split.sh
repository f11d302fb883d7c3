#!/usr/bin/env bash
# GPU: the warp-specialized dense kernel with QK^T split between its math warpgroups (SPLIT_S) against QK^T in both:
# the A/B at DeepSeek-V3 shapes, then the kernel's GPU tests with the split on (plugin ws_split_on).
#   bash benchmarks/experiments/gpu_dense_ws_split.sh SHA   (writes $OUT/dense_ws_split.{log,json})
set -uo pipefail
export PYTHONPATH=$PWD/src:$PWD/benchmarks/experiments PYTHONUNBUFFERED=1
{
echo "commit ${1:-unknown}"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
timeout 150 python3 benchmarks/experiments/dense_ws_ab.py "$OUT/dense_ws_split.json" --variants triton gluon-ws-dup \
  gluon-ws-split --points bf16:64:4:1000 bf16:64:128:16384 bf16:64:32:4096 bf16:128:32:4096 bf16:64:32:4096:2 \
  bf16:128:128:16384 bf16:64:8:16384 2>&1 | grep -v -i warn
timeout 150 python3 -m pytest -q -p no:cacheprovider -p ws_split_on -n 16 tests/kernels/test_dense_decode.py \
  -k "warp_specialized or gpu_v3 or km or graph" 2>&1 | tail -4
} 2>&1 | tee "$OUT/dense_ws_split.log"
