#!/usr/bin/env bash
# GPU: the dense decode's dependent launches across batch sizes with the combine launched plain as a third variant
# (dense_pdl_ab.py --no-combine), the dense GPU tests and memcheck over the dense kernels (sanitize_dense.py).
#   BUDGET=300 bash benchmarks/experiments/gpu_round_dense_pdl2.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-300}
. "$(dirname "$0")/../budget.sh"
P=${POINTS:-"bf16:16:1:4096 bf16:16:2:4096 bf16:16:4:4096 bf16:16:8:4096 bf16:16:16:4096 bf16:16:32:4096 \
bf16:16:8:1024 bf16:16:8:16384 bf16:64:8:4096 bf16:128:8:4096 fp8:16:8:4096 fp8:16:1:4096"}
{
machine "${1:-}"
step 120 python3 benchmarks/experiments/dense_pdl_ab.py "$OUT/dense_pdl2_ab.json" --no-combine --rounds 3 --points $P
step 60 python3 -m pytest -m gpu tests/kernels/test_dense_decode.py tests/kernels/test_combine.py -q $X \
  -p no:cacheprovider --tb=short
OUT=$OUT SANITIZERS="memcheck-dense" step 100 bash benchmarks/sanitizers.sh
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_pdl2.log"
grep -E "^== |bits|passed|failed|^E |Error|ERROR SUMMARY|^dense|^copy|result" "$OUT/dense_pdl2.log" | cut -c1-200
