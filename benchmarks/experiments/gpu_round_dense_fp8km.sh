#!/usr/bin/env bash
# GPU: FP8 V3.2 rows in keys-major 64x64 tiles against the planner's pick and row-major 64x64 (dense_fp8_km_ab.py),
# then the dense GPU tests.
#   BUDGET=250 bash benchmarks/experiments/gpu_round_dense_fp8km.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-250}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 150 python3 benchmarks/experiments/dense_fp8_km_ab.py "$OUT/dense_fp8km.json" --points ${POINTS:-64:32:4096 64:128:4096 128:32:4096}
step 60 python3 -m pytest -m gpu tests/kernels/test_dense_decode.py -q $X -p no:cacheprovider --tb=short
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_fp8km.log"
grep -E "^== |passed|failed|^E |Error|^fp8|^copy" "$OUT/dense_fp8km.log" | cut -c1-200
