#!/usr/bin/env bash
# GPU: the batch-invariant build that merges a held token with its last piece still in the accumulators, against the
# build before it (its src tree under build/oldsrc, carried with the call): the batch-invariance and warp-specialized
# kernel GPU tests on the new build, then bi_cost.py (median of 10) on the old tree and on the new one, one after the
# other, at b = 32..256; one JSON of both.
#   git archive OLD src/wavemla | tar -x -C build/oldsrc; BUDGET=420 bash benchmarks/experiments/gpu_ws_held_regs.sh SHA
# The build it measured is commit 66e816a (OLD 7f5536f); measured slower and reverted: docs/planner.md,
# "Batch-invariant pieces".
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
{
machine "$SHA"
step 170 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_batch_invariance.py \
  tests/kernels/test_sparse_decode_ws.py
step 220 python3 "$(dirname "$0")/bi_ab.py" "$OUT/ws_held_regs.json" --reps 10 --batch 32 64 96 128 133 148 200 256
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_held_regs.log"
grep -E "^(old|new) " "$OUT/ws_held_regs.log"
grep -E "^== |passed|failed|error" "$OUT/ws_held_regs.log" | cut -c1-160
