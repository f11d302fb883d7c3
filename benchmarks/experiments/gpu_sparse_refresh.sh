#!/usr/bin/env bash
# After a change of the sparse decode kernel: `wavemla bench` at FlashMLA's anchor shapes (h = 64 s_q = 1 and 2,
# CSA h = 128), the batch-invariant cost (bi_cost.py, b = 32..256), then the b = 1..256 curves' stretches around the
# perfect fits and the spread's straddles, where the per-request steps sit (median of 5; curve_steps.py prints the
# steps above 5%). Output under $OUT: bench.log, bench_h64.json, bench_h64_s2.json, bench_h128.json, bi_cost.json,
# curves.log and curve_*.json. PART=bench or PART=curves runs one of the two (each about 100 s on an H100), so that
# each fits a call of its own.
#   [PART=bench|curves] bash benchmarks/experiments/gpu_sparse_refresh.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-520}
SHA=${1:-unknown}
source benchmarks/budget.sh
W="python3 -m wavemla.cli"
PART=${PART:-all}
[ "$PART" = curves ] || {
  machine "$SHA"
  step 110 $W bench --mode csa hca --s-q 1 --heads 64 --batch 1 8 32 48 64 80 96 128 148 256 --reps 30 \
    --json "$OUT/bench_h64.json" --label "$SHA"
  step 70 $W bench --mode csa hca --s-q 2 --heads 64 --batch 1 32 64 96 128 256 --reps 15 \
    --json "$OUT/bench_h64_s2.json" --label "$SHA"
  step 60 $W bench --mode csa --s-q 1 --heads 128 --batch 1 32 64 96 128 256 --reps 15 \
    --json "$OUT/bench_h128.json" --label "$SHA"
  step 150 python3 benchmarks/bi_cost.py --batch 32 64 96 128 133 140 148 156 164 200 256 --reps 10 \
    --json "$OUT/bi_cost.json"
} 2>&1 | quiet > "$OUT/bench.log"
[ "$PART" = bench ] || {
  machine "$SHA"
  curve_part 90 csa 64 1 124 140
  curve_part 90 hca 64 1 172 200
  curve_part 60 csa 64 2 62 70
  curve_part 60 csa 128 1 62 70
  curve_part 60 hca 64 2 84 101
} 2>&1 | quiet > "$OUT/curves.log"
[ "$PART" = bench ] || python3 benchmarks/experiments/curve_steps.py "$OUT"/curve_*.json | tee -a "$OUT/curves.log"
