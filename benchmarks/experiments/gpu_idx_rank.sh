#!/usr/bin/env bash
# The indexer's rank program against another indexer.py (BASE_PY: a file in the checkout, e.g. written by
# `git show REV:src/wavemla/kernels/indexer.py > base_indexer.py` before the call, since the GPU machine's copy may
# not hold REV): the indexer's GPU tests, whole calls of both in one process (idx_ab.py, alternated rounds) and the
# rank program's phases (idx_rank_phases.py). Output under $OUT: idx_rank.log, idx_rank_ab*.json,
# idx_rank_phases.json. The shapes (B:N) can be set: SHAPES (spread select), TOKEN_SHAPES (per-token select),
# PHASE_SHAPES (unquoted: each list splits into arguments); LIST_KTH=0 leaves out the k-th key step's own tests
# (written for the CPU lane; without xdist their compiles took over the step's 60 s); SELECT_PHASES=1 adds the
# per-token select's phases (idx_select_phases.py, its own shapes: idx_select_phases.json).
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_rank.sh <git-sha> BASE_PY
#   SHAPES="32:32768 1:32768 64:32768" TOKEN_SHAPES=128:32768 PHASE_SHAPES="1:32768 32:32768" LIST_KTH=0 \
#     OUT=/some/dir bash benchmarks/experiments/gpu_idx_rank.sh <git-sha> BASE_PY
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
export PYTHONPATH=$PYTHONPATH:$PWD/benchmarks/experiments
base=$2
SHAPES=${SHAPES:-32:32768 64:32768 1:32768 8:32768 16:32768}
TOKEN_SHAPES=${TOKEN_SHAPES:-128:32768}
PHASE_SHAPES=${PHASE_SHAPES:-1:32768 32:32768 64:32768}
{
  machine "$1"
  step 200 python3 -m pytest tests/kernels/test_indexer.py -m gpu -q -p no:cacheprovider $X
  [ "${LIST_KTH:-1}" = 0 ] || step 60 python3 -m pytest tests/kernels/test_indexer.py -k list_kth -q -p no:cacheprovider
  step 240 python3 benchmarks/experiments/idx_ab.py "$OUT/idx_rank_ab.json" "$base" $SHAPES --paths spread --rounds 2
  step 90 python3 benchmarks/experiments/idx_ab.py "$OUT/idx_rank_ab_token.json" "$base" $TOKEN_SHAPES --paths token \
    --rounds 2
  step 120 python3 benchmarks/experiments/idx_rank_phases.py "$OUT/idx_rank_phases.json" $PHASE_SHAPES
  [ "${SELECT_PHASES:-0}" = 1 ] && step 150 python3 benchmarks/experiments/idx_select_phases.py \
    "$OUT/idx_select_phases.json"
} 2>&1 | quiet | tee "$OUT/idx_rank.log" | tail -40
