#!/usr/bin/env bash
# GPU: the staged FP8 16x32 tiles priced at 0.93 of the register tile at its partition (plan.py, _STAGED_FP8_RATIO):
# the bf16-q tests over FP8 rows, then the 16-head batches whose partition that moved against the curves of
# gpu_sparse_staged2.sh (median of 5, as the curves).
#   BUDGET=300 bash benchmarks/experiments/gpu_sparse_staged3.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-300}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 90 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_sparse_decode.py -k "bf16_q or staged"
step 80 python3 -m wavemla.cli bench --mode csa --s-q 1 --heads 16 --batch 13 93 94 95 96 97 98 99 100 101 102 103 104 105 159 160 161 162 163 164 165 166 167 168 169 170 171 --reps 5 \
  --json "$OUT/changed_csa_h16.json" --label "${1:-}"
step 80 python3 -m wavemla.cli bench --mode hca --s-q 1 --heads 16 --batch 7 45 46 47 48 49 50 51 67 68 69 70 71 72 73 117 206 207 208 209 210 211 212 --reps 5 \
  --json "$OUT/changed_hca_h16.json" --label "${1:-}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/sparse_staged3.log"
grep -E "^== |passed|failed|ceilings| b[0-9]+ " "$OUT/sparse_staged3.log" | cut -c1-150
