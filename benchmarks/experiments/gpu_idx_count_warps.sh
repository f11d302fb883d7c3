#!/usr/bin/env bash
# The spread select's first launch (count and list the parts) at fewer warps than the rank program's 16: whole
# indexer calls of the package against copies of indexer.py whose count launch runs 4 and 8 warps (one walker a
# thread), in one process each (idx_ab.py, alternated rounds, indices compared). The copies are written before the
# call into benchmarks/experiments/variants/ (ignored by git: carry it), e.g. by
#   python3 benchmarks/experiments/count_warps_variant.py 4 8
# Then the 64-head anchor table of the current build (wavemla bench), as the budget allows. Output under $OUT:
# idx_count_warps.log, idx_count_w{4,8}.json, bench.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_count_warps.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
export PYTHONPATH=$PYTHONPATH:$PWD/benchmarks/experiments
SHAPES=${SHAPES:-1:32768 8:32768 16:32768 32:32768 64:32768 32:262144}
{
  machine "$1"
  for w in ${WARPS:-4 8}; do
    step 200 python3 benchmarks/experiments/idx_ab.py "$OUT/idx_count_w$w.json" \
      benchmarks/experiments/variants/indexer_count_w$w.py $SHAPES --paths spread --rounds 2
  done
  [ "${BENCH:-1}" = 1 ] && step 150 python3 -m wavemla.cli bench --reps 15 --json "$OUT/bench.json" --label "$1"
} 2>&1 | quiet | tee "$OUT/idx_count_warps.log" | tail -60
