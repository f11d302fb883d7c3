#!/usr/bin/env bash
# GPU: the build whose warp-specialized kernel merges batch-invariant pieces in their program, with the merge's loads
# issued a piece ahead. The sparse decode, warp-specialized, determinism and batch-invariance GPU tests; the
# batch-invariant cost (bi_cost.py, median of 10); the demo; a stress run; memcheck over the kernel's batch-invariant
# cases; then the default plans against the build before these kernel changes (gpu_ws_held_ab.sh; its src tree under
# build/oldsrc, carried with the call).
#   git archive e655edc src/wavemla | tar -x -C build/oldsrc
#   BUDGET=480 bash benchmarks/experiments/gpu_ws_held_final.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-480}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
{
machine "$SHA"
step 170 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_sparse_decode.py \
  tests/kernels/test_sparse_decode_ws.py tests/kernels/test_determinism.py tests/kernels/test_batch_invariance.py -k gpu
step 80 python3 benchmarks/bi_cost.py --reps 10 --batch 1 32 64 96 128 133 148 200 256 --json "$OUT/bi_cost.json"
step 40 python3 -m wavemla.cli demo
step 60 python3 -m wavemla.cli stress --batch 8 67 133 162 --replays 3000
step 90 compute-sanitizer --error-exitcode 99 --tool memcheck python3 -m pytest -q -p no:cacheprovider \
  tests/kernels/test_sparse_decode_ws.py -k "gpu_matches and batch-invariant"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_held_final.log"
grep -E "^== |passed|failed|Error|result|mismatch|ERROR SUMMARY|^mode|^csa  |^hca  " "$OUT/ws_held_final.log" \
  | cut -c1-150
left=$((END - SECONDS))
[ "$left" -gt 60 ] && BUDGET=$((left - 5)) bash "$(dirname "$0")/gpu_ws_held_ab.sh"
