#!/usr/bin/env bash
# GPU: programmatic dependent launch through the dense decode's three launches (scheduler -> split -> combine),
# A/B against plain launches (dense_pdl_ab.py: same plan and inputs, bits must be equal), the dense GPU tests,
# compute-sanitizer over the dense kernels, and the dense table of this build (wavemla bench --dense).
#   BUDGET=480 bash benchmarks/experiments/gpu_round_dense_pdl.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-480}
. "$(dirname "$0")/../budget.sh"
P=${POINTS:-"bf16:16:1:1024 bf16:16:1:4096 bf16:16:8:4096 bf16:16:32:4096 bf16:16:128:4096 bf16:16:128:16384 \
bf16:64:1:4096 bf16:64:32:4096 bf16:64:128:4096 bf16:128:32:4096 fp8:16:32:4096 fp8:64:128:4096"}
{
machine "${1:-}"
step 100 python3 benchmarks/experiments/dense_pdl_ab.py "$OUT/dense_pdl_ab.json" --points $P
step 80 python3 -m pytest -m gpu tests/kernels/test_dense_decode.py tests/kernels/test_combine.py -q $X \
  -p no:cacheprovider --tb=short
OUT=$OUT SANITIZERS="memcheck-dense racecheck-dense" step 200 bash benchmarks/sanitizers.sh
cat "$OUT/sanitizers.txt"
step 90 python3 -m wavemla.cli bench --dense --kv-formats bf16 --batch 32 128 --seqlen 4096 16384 --heads 16 64 128 \
  --lengths uniform --reps 10 --json "$OUT/dense_table.json" --label "${1:-unknown}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_pdl.log"
grep -E "^== |bits|passed|failed|^E |Error|ERROR SUMMARY|hazard|^dense|^copy" "$OUT/dense_pdl.log" | cut -c1-180
