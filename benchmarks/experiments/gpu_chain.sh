#!/usr/bin/env bash
# Chained plans (Plan.chained: a token cut between two programs handed from the first to the second as its
# online-softmax state, no partial and no combine) on a GPU: the warp-specialized kernel's GPU tests (chained cases
# among them: bits equal to a plan that cuts no token, flags back to zero under graph replay), the split kernel's and
# the planner's tests, stress replays of chained batches against eager calls, then chain_ab.py against the plan
# without chaining and the batch before. Output under $OUT: chain.log, chain_ab.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_chain.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
POINTS=${POINTS:-"csa:133 csa:137 csa:140 csa:148 csa:160 csa:200 hca:133 hca:140 hca:160 hca:200 csa-s2:70
  csa-h128:70 hca-h128:80"}
{
  machine "$1"
  step 200 python3 -m pytest tests/kernels/test_sparse_decode_ws.py tests/kernels/test_sparse_decode.py \
    tests/test_plan.py -q -p no:cacheprovider $X
  step 60 python3 -m wavemla.tools.stress --mode csa --batch 133 140 200 --replays 2000
  step 40 python3 -m wavemla.tools.stress --mode hca --batch 140 --replays 2000
  # shellcheck disable=SC2086
  step 240 python3 benchmarks/experiments/chain_ab.py "$OUT/chain_ab.json" --points $POINTS --prev --rounds 3 --reps 10
} 2>&1 | quiet | tee "$OUT/chain.log" | tail -45
