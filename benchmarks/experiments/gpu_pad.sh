#!/usr/bin/env bash
# Padded-token plans (Plan.token_units: each token padded with empty units to a multiple of the part size, one piece
# of one token a program) on a GPU: the warp-specialized kernel's and the split kernel's GPU tests (padded cases
# among them), the planner's tests, stress replays of batches the planner pads against eager calls, then pad_ab.py at
# points of every curve where the planner pads, against the plan without padding and the batch before. Output under
# $OUT: pad.log, pad_ab.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_pad.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
POINTS="csa:27 csa:30 csa:32 csa:34 csa:40 csa:44 hca:23 hca:27 hca:30 hca:33 csa-s2:14 csa-s2:17 csa-s2:20
  csa-h128:14 csa-h128:20 hca-s2:12 hca-s2:15 hca-h128:12 hca-h128:15 csa-h16:14 csa-h16:27 csa-h16:34 csa-h16:67
  csa-h16:80 hca-h16:30 hca-h16:45 hca-h16:52"
{
  machine "$1"
  step 230 python3 -m pytest tests/kernels/test_sparse_decode_ws.py tests/kernels/test_sparse_decode.py \
    tests/test_plan.py -q -p no:cacheprovider $X
  step 60 python3 -m wavemla.tools.stress --mode csa --batch 27 32 40 --replays 2000
  step 40 python3 -m wavemla.tools.stress --mode hca --batch 23 30 --replays 1000
  # shellcheck disable=SC2086
  step 220 python3 benchmarks/experiments/pad_ab.py "$OUT/pad_ab.json" --points $POINTS --prev --rounds 3 --reps 10
} 2>&1 | quiet | tee "$OUT/pad.log" | tail -45
