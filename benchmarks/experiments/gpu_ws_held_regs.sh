#!/usr/bin/env bash
# GPU: the batch-invariant build that merges a held token with its last piece still in the accumulators, against the
# build before it (its src tree under build/oldsrc, carried with the call): the batch-invariance and warp-specialized
# kernel GPU tests on the new build, then bi_cost.py (median of 10) on the old tree and on the new one, one after the
# other, at b = 32..256; one JSON of both.
#   git archive OLD src/wavemla | tar -x -C build/oldsrc; BUDGET=420 bash benchmarks/experiments/gpu_ws_held_regs.sh SHA
# The build it measured is commit 66e816a (OLD 7f5536f); measured slower and reverted: docs/planner.md,
# "Batch-invariant pieces".
set -uo pipefail
bash "$(dirname "$0")/gpu_bi_ab.sh" ws_held_regs "$@"
