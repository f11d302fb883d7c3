#!/usr/bin/env bash
# GPU: the batch-invariant build as shipped (the in-program merge as one loop over box and piece): the
# batch-invariance, warp-specialized kernel, determinism and combine GPU tests, `wavemla stress --batch-invariant`
# (HCA and CSA, 3,000 replays each, bitwise against eager calls), then compute-sanitizer memcheck and racecheck over
# the warp-specialized kernel's batch-invariant cases (a program merging the tokens it holds, and mixed launches).
#   BUDGET=420 bash benchmarks/experiments/gpu_bi_shipped.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 150 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_batch_invariance.py \
  tests/kernels/test_sparse_decode_ws.py tests/kernels/test_determinism.py tests/kernels/test_combine.py
step 60 python3 -m wavemla.cli stress --mode hca --batch-invariant --batch 8 67 133 162 --replays 3000
step 60 python3 -m wavemla.cli stress --mode csa --batch-invariant --batch 8 67 133 162 --replays 3000
for tool in memcheck racecheck; do
  extra=""; [ "$tool" = racecheck ] && extra="--racecheck-report hazard"
  step 100 compute-sanitizer --error-exitcode 99 --tool $tool $extra python3 -m pytest -q -p no:cacheprovider \
    tests/kernels/test_sparse_decode_ws.py -k "gpu_matches and batch-invariant"
done
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/bi_shipped.log"
grep -E "^== |passed|failed|result:|ERROR SUMMARY|RACECHECK SUMMARY|Error" "$OUT/bi_shipped.log" | cut -c1-200
