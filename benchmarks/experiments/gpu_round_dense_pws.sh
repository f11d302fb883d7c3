#!/usr/bin/env bash
# GPU: the dense decode's keys-major tiles with Pᵀ through scratch rows (sm_90 default in this build) against P in
# registers (dense_pws_ab.py), the dense GPU tests, and compute-sanitizer memcheck and racecheck over the dense
# kernels (sanitize_dense.py, which forces a keys-major case).
#   BUDGET=420 bash benchmarks/experiments/gpu_round_dense_pws.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
P=${POINTS:-"bf16:64:1:4096 bf16:64:8:4096 bf16:64:32:4096 bf16:64:128:4096 bf16:64:32:16384 bf16:64:128:16384 \
bf16:128:32:4096 bf16:128:128:4096 bf16:128:128:16384 bf16:64:32:4096:2"}
{
machine "${1:-}"
step 130 python3 benchmarks/experiments/dense_pws_ab.py "$OUT/dense_pws_ab.json" --points $P
step 70 python3 -m pytest -m gpu tests/kernels/test_dense_decode.py tests/kernels/test_combine.py -q $X \
  -p no:cacheprovider --tb=short
step 30 python3 -m pytest tests/kernels/test_dense_decode.py -q -p no:cacheprovider -k "scratch" --tb=short
OUT=$OUT SANITIZERS="memcheck-dense racecheck-dense" step 200 bash benchmarks/sanitizers.sh
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_pws.log"
grep -E "^== |passed|failed|^E |Error|ERROR SUMMARY|RACECHECK|^dense|^copy|result|rc=" "$OUT/dense_pws.log" | cut -c1-200
