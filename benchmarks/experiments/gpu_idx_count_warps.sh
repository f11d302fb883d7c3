#!/usr/bin/env bash
# The spread select's first launch (count and list the parts) at fewer warps than the rank program's 16: whole
# indexer calls of the package against copies of indexer.py whose count launch runs 4 (and 8) warps (one walker a
# thread), in one process each (idx_ab.py, alternated rounds, indices compared). The copies are written before the
# call into benchmarks/experiments/variants/ (ignored by git: carry it) by
#   python3 benchmarks/experiments/count_warps_variant.py 4 8
# Then, as the budget allows, the current build's 64-head anchor table (wavemla bench, BENCH=0 leaves it out), its
# batch-invariant cost (bi_cost.py, BI=0 leaves it out) and the 8-warp copy. Output under $OUT:
# idx_count_warps.log, idx_count_w{4,8}.json, bench.json, bi_cost.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_count_warps.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
export PYTHONPATH=$PYTHONPATH:$PWD/benchmarks/experiments
SHAPES=${SHAPES:-1:32768 8:32768 16:32768 32:32768 64:32768 32:262144}
V=benchmarks/experiments/variants
{
  machine "$1"
  step 170 python3 benchmarks/experiments/idx_ab.py "$OUT/idx_count_w4.json" $V/indexer_count_w4.py $SHAPES \
    --paths spread --rounds 2
  [ "${BENCH:-1}" = 1 ] && step 130 python3 -m wavemla.cli bench --reps 15 --json "$OUT/bench.json" --label "$1"
  [ "${BI:-1}" = 1 ] && step 150 python3 benchmarks/bi_cost.py --batch 32 64 96 128 133 148 200 256 --reps 10 \
    --json "$OUT/bi_cost.json"
  step 150 python3 benchmarks/experiments/idx_ab.py "$OUT/idx_count_w8.json" $V/indexer_count_w8.py $SHAPES \
    --paths spread --rounds 2
} 2>&1 | quiet | tee "$OUT/idx_count_warps.log" | tail -70
