#!/usr/bin/env bash
# GPU: a piece's last tile prefetching the list's next tile into L2 (launcher option prefetch_past, on by default in
# this build), A/B against it off (launch_ab.py: same plan and inputs, bits must be equal), then the batch-invariant
# cost at median of 30 and the GPU tests of the sparse decode and of batch invariance.
#   BUDGET=420 bash benchmarks/experiments/gpu_round_prefetch_past.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
P=${POINTS:-"csa:32:1:64:2 csa:128:1:64:2 csa:256:1:64:2 hca:32:1:64:2 hca:128:1:64:2 hca:256:1:64:2 \
csa:133:1:64 csa:148:1:64 csa:96:2:64 csa:96:1:128 csa:64:1:64 hca:128:1:64"}
{
machine "${1:-}"
step 150 python3 benchmarks/experiments/launch_ab.py "$OUT/prefetch_past_ab.json" --kw prefetch_past=0 --points $P
step 70 python3 benchmarks/bi_cost.py --batch 32 64 128 256 --reps 30 --json "$OUT/bi_cost.json"
step 150 python3 -m pytest -m gpu tests/kernels/test_sparse_decode.py tests/kernels/test_batch_invariance.py \
  tests/kernels/test_determinism.py -q $X -p no:cacheprovider --tb=short
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/prefetch_past.log"
grep -E "^== |bits|passed|failed|^E |^csa|^hca|^mode|Error" "$OUT/prefetch_past.log" | cut -c1-190
