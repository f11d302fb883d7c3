#!/usr/bin/env bash
# GPU: a batch-invariant build against the build before it (its src tree under build/oldsrc, carried with the call):
# the batch-invariance and warp-specialized kernel GPU tests on the new build (and EXTRA_TESTS), bi_cost.py (median
# of 10) on the old tree and on the new one at b = 32..256 (one JSON of both, bi_ab.py), and with STRESS=1 `wavemla
# stress --batch-invariant` (HCA and CSA, 3,000 replays each) on the new build. Writes NAME.log and NAME.json under
# $OUT; the per-build scripts (gpu_ws_held_regs.sh, gpu_ws_merge_loop.sh, gpu_ws_merge_ahead.sh) call it.
#   git archive OLD src/wavemla | tar -x -C build/oldsrc; BUDGET=420 bash benchmarks/experiments/gpu_bi_ab.sh NAME SHA
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
NAME=$1
SHA=${2:-}
{
machine "$SHA"
step 170 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_batch_invariance.py \
  tests/kernels/test_sparse_decode_ws.py ${EXTRA_TESTS:-}
step 220 python3 "$(dirname "$0")/bi_ab.py" "$OUT/$NAME.json" --reps 10 --batch 32 64 96 128 133 148 200 256
if [ "${STRESS:-0}" = 1 ]; then
  step 60 python3 -m wavemla.cli stress --mode hca --batch-invariant --batch 8 67 133 162 --replays 3000
  step 60 python3 -m wavemla.cli stress --mode csa --batch-invariant --batch 8 67 133 162 --replays 3000
fi
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/$NAME.log"
grep -E "^(old|new) " "$OUT/$NAME.log"
grep -E "^== |passed|failed|error|mismatch" "$OUT/$NAME.log" | cut -c1-160
