#!/usr/bin/env bash
# GPU: the warp-specialized sparse kernel merging the batch-invariant pieces of the tokens a program holds whole (and
# keeping the staged q and the gather's run across a token's pieces). Its GPU tests and the batch-invariance tests
# (CSA b = 1..256 and HCA, bitwise against b = 1), the batch-invariant cost (bi_cost.py, median of 10), default
# plans at a few batches (to compare with the curves: the default path's code changed only in the gather's segment
# loop), then compute-sanitizer racecheck over the new tests.
#   BUDGET=560 bash benchmarks/experiments/gpu_ws_held.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-560}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
{
machine "$SHA"
step 200 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_sparse_decode_ws.py \
  tests/kernels/test_batch_invariance.py -k "gpu"
step 90 python3 benchmarks/bi_cost.py --reps 10 --batch 1 32 64 96 128 133 148 200 256 --json "$OUT/bi_cost.json"
step 60 python3 -m wavemla.cli bench --mode csa --heads 64 --batch 8 64 128 133 148 256 --reps 5 \
  --json "$OUT/csa_h64.json" --label "$SHA"
step 60 python3 -m wavemla.cli bench --mode hca --heads 64 --batch 8 64 128 133 148 256 --reps 5 \
  --json "$OUT/hca_h64.json" --label "$SHA"
step 120 compute-sanitizer --error-exitcode 99 --tool racecheck --racecheck-report hazard python3 -m pytest -q \
  -p no:cacheprovider tests/kernels/test_sparse_decode_ws.py -k "gpu_matches and batch-invariant-held"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_held.log"
grep -E "^== |passed|failed|Error|assert|RACECHECK SUMMARY|ERROR SUMMARY|^mode|^csa  |^hca  |ceilings" \
  "$OUT/ws_held.log" | cut -c1-160
