#!/usr/bin/env bash
# The rank program's radix passes that stop once the k-th key's bucket is taken whole (and its candidates' rows loaded
# with their keys), against the indexer.py of BASE: the indexer's GPU tests, whole calls of both in one process
# (idx_ab.py, alternated rounds) and the new rank program's phases (idx_rank_phases.py). Output under $OUT:
# idx_rank.log, idx_rank_ab.json, idx_rank_phases.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_rank.sh <git-sha> BASE
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
export PYTHONPATH=$PYTHONPATH:$PWD/benchmarks/experiments
F='Warning[:(]|warner\(|_warn_once'
git show "$2:src/wavemla/kernels/indexer.py" > /tmp/indexer_base.py
{
  machine "$1"
  step 200 python3 -m pytest tests/kernels/test_indexer.py -m gpu -q -p no:cacheprovider $X
  step 60 python3 -m pytest tests/kernels/test_indexer.py -k list_kth -q -p no:cacheprovider
  step 240 python3 benchmarks/experiments/idx_ab.py "$OUT/idx_rank_ab.json" /tmp/indexer_base.py \
    32:32768 64:32768 1:32768 8:32768 16:32768 --paths spread --rounds 2
  step 90 python3 benchmarks/experiments/idx_ab.py "$OUT/idx_rank_ab_token.json" /tmp/indexer_base.py \
    128:32768 --paths token --rounds 2
  step 120 python3 benchmarks/experiments/idx_rank_phases.py "$OUT/idx_rank_phases.json" 1:32768 32:32768 64:32768
} 2>&1 | grep -v -E "$F" | tee "$OUT/idx_rank.log" | tail -40
