#!/usr/bin/env bash
# Per-token against chunked top-k select of the lightning indexer on one GPU: the indexer's GPU tests (both select
# paths), then both paths timed (CUDA-graph replay, L2 flushed) with the score kernel alone next to them; JSON in
# $OUT/idx_select.json, the printed table in $OUT/idx_select.log. Under 150 s on an H200:
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_select.sh
set -uo pipefail
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader 2>&1 | head -1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
timeout 55 python3 -m pytest tests/kernels/test_indexer.py -m gpu -q -p no:cacheprovider 2>&1 | tail -4 \
  | tee "$OUT/idx_select-tests.log"
echo "tests rc=${PIPESTATUS[0]}"
timeout 80 python3 benchmarks/experiments/idx_select.py "$OUT/idx_select.json" 2>&1 | grep -v Warn \
  | tee "$OUT/idx_select.log"
echo "bench rc=${PIPESTATUS[0]}"
