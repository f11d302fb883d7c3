#!/usr/bin/env bash
# GPU: the batch-invariant in-program merge with two partials' loads in flight instead of one, against the build
# before it (its src tree under build/oldsrc, carried with the call): the batch-invariance, warp-specialized kernel
# and determinism GPU tests on the new build, bi_cost.py (median of 10) on the old tree and the new one at b = 32..256
# (one JSON of both), then `wavemla stress --batch-invariant` (HCA and CSA, 3,000 replays each) on the new build.
#   git archive OLD src/wavemla | tar -x -C build/oldsrc; BUDGET=420 bash benchmarks/experiments/gpu_ws_merge_ahead.sh SHA
# The build it measured (commit d9189c3: the merge of 1ca2926 with loads two steps ahead) was no faster (CSA b=128 67.7 µs
# against 67.4, HCA 99.3 against 98.4; 2026-12-02-h200-ws-merge-ahead.{log,json}) and was not kept.
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
{
machine "$SHA"
step 170 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_batch_invariance.py \
  tests/kernels/test_sparse_decode_ws.py tests/kernels/test_determinism.py
step 220 python3 "$(dirname "$0")/bi_ab.py" "$OUT/ws_merge_ahead.json" --reps 10 --batch 32 64 96 128 133 148 200 256
step 60 python3 -m wavemla.cli stress --mode hca --batch-invariant --batch 8 67 133 162 --replays 3000
step 60 python3 -m wavemla.cli stress --mode csa --batch-invariant --batch 8 67 133 162 --replays 3000
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_merge_ahead.log"
grep -E "^(old|new) " "$OUT/ws_merge_ahead.log"
grep -E "^== |passed|failed|error|mismatch" "$OUT/ws_merge_ahead.log" | cut -c1-160
