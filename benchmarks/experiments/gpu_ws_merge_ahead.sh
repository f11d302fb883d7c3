#!/usr/bin/env bash
# GPU: the batch-invariant in-program merge with two partials' loads in flight instead of one, against the build
# before it (its src tree under build/oldsrc, carried with the call): the batch-invariance, warp-specialized kernel
# and determinism GPU tests on the new build, bi_cost.py (median of 10) on the old tree and the new one at b = 32..256
# (one JSON of both), then `wavemla stress --batch-invariant` (HCA and CSA, 3,000 replays each) on the new build.
#   git archive OLD src/wavemla | tar -x -C build/oldsrc; BUDGET=420 bash benchmarks/experiments/gpu_ws_merge_ahead.sh SHA
# The build it measured (commit d9189c3: the merge of 1ca2926 with loads two steps ahead) was no faster (CSA b=128 67.7 µs
# against 67.4, HCA 99.3 against 98.4; 2026-12-02-h200-ws-merge-ahead.{log,json}) and was not kept.
set -uo pipefail
EXTRA_TESTS=tests/kernels/test_determinism.py STRESS=1 bash "$(dirname "$0")/gpu_bi_ab.sh" ws_merge_ahead "$@"
