#!/usr/bin/env bash
# GPU: the checks of the tile-loop build (next-tile L2 prefetch, P through scratch rows on sm_90) that the decode run
# ran out of time for: the GPU tests of the sparse decode (batch invariance b = 1..256 included), compute-sanitizer
# over the scratch-row path, and the batch-invariant cost again at median of 30.
#   BUDGET=480 bash benchmarks/experiments/gpu_round_tile_loop_check.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-480}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 260 python3 -m pytest -m gpu tests/kernels/test_sparse_decode.py tests/kernels/test_batch_invariance.py \
  tests/kernels/test_determinism.py tests/kernels/test_numerics.py tests/test_hostile_inputs.py -q $X -p no:cacheprovider \
  --tb=short
OUT=$OUT SANITIZERS="memcheck-pscratch racecheck-pscratch memcheck-csa" step 200 bash benchmarks/sanitizers.sh
cat "$OUT/sanitizers.txt"
step 60 python3 benchmarks/bi_cost.py --batch 32 64 128 256 --reps 30 --json "$OUT/bi_cost.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/check.log"
grep -E "^== |passed|failed|rc=|^E |^csa|^hca|^mode" "$OUT/check.log" | cut -c1-170
