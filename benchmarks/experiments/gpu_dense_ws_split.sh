#!/usr/bin/env bash
# GPU: the warp-specialized dense kernel with QK^T split between its math warpgroups (SPLIT_S) against QK^T in both:
# the A/B at DeepSeek-V3 shapes, the kernel's GPU tests with the split on (plugin ws_split_on); then the shipped
# build's dense stress (CUDA graphs on several streams against eager, bitwise) and its table at b 32/128.
#   BUDGET=500 bash benchmarks/experiments/gpu_dense_ws_split.sh SHA   (writes under $OUT)
# Ran at 6a6789d, where dense_decode_ws.SPLIT_S chose between the two builds (variants gluon-ws-dup / -split of
# dense_ws_ab.py, plugin ws_split_on.py); the both-warpgroups build, its variants and the plugin were removed after.
set -uo pipefail
BUDGET=${BUDGET:-500}
. "$(dirname "$0")/../budget.sh"
export PYTHONPATH=$PYTHONPATH:$PWD/benchmarks/experiments
W="python3 -m wavemla.cli"
{
machine "${1:-}"
step 150 python3 benchmarks/experiments/dense_ws_ab.py "$OUT/dense_ws_split.json" --variants triton gluon-ws-dup \
  gluon-ws-split --points bf16:64:4:1000 bf16:64:128:16384 bf16:64:32:4096 bf16:128:32:4096 bf16:64:32:4096:2 \
  bf16:128:128:16384 bf16:64:8:16384
step 120 python3 -m pytest -q -p no:cacheprovider -p ws_split_on -n 16 tests/kernels/test_dense_decode.py \
  -k "warp_specialized or gpu_v3 or km or graph"
step 100 $W stress --mode dense --heads 128 --seqlen 4096 --replays 2000
step 100 $W stress --mode dense --heads 64 --seqlen 4096 --replays 2000
step 120 $W bench --dense --kv-formats bf16 --batch 32 128 --seqlen 4096 16384 65536 --heads 16 64 128 \
  --lengths uniform skewed --reps 10 --json "$OUT/dense_ws_table.json" --label "${1:-unknown}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_ws_split.log"
grep -E "^== |passed|failed|mismatch|ceilings|^dense bf16 h" "$OUT/dense_ws_split.log" | cut -c1-165
