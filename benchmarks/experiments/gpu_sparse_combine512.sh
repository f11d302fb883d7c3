#!/usr/bin/env bash
# GPU: the sparse combine's all-pieces merge over 512 columns a program (kernels/combine.py, wide_block_d): the
# combine tests, then `wavemla bench` against 128 columns (bench_sparse_combine128.py), alternated in one run, at the
# small batches whose plans merge that way (CSA/HCA, 16 and 64 heads, b = 1, 4, 8).
#   BUDGET=200 bash benchmarks/experiments/gpu_sparse_combine512.sh SHA   (writes sparse-c512-*.json and
#   sparse_combine512.log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-200}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 150 python3 -m pytest -q -n 8 -p no:cacheprovider tests/kernels/test_combine.py
for m in csa hca; do
  A="--mode $m --s-q 1 --heads 16 64 --batch 1 4 8 --reps 15 --label ${1:-}"
  step 40 python3 -m wavemla.cli bench $A --json "$OUT/sparse-c512-$m-new.json"
  step 40 python3 benchmarks/experiments/bench_sparse_combine128.py $A --json "$OUT/sparse-c512-$m-old.json"
done
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/sparse_combine512.log"
grep -E "^== |passed|failed|error|^(csa|hca) " "$OUT/sparse_combine512.log" | cut -c1-110
