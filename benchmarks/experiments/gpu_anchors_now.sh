#!/usr/bin/env bash
# The headline figures of one build in one call: the 64-head sparse anchors (`wavemla bench`, with FlashMLA's ratios
# on an H200), the batch-invariant cost (bi_cost.py), the dense aim's bf16 points (h = 64, s_k 4K, b = 32 and 128)
# and whole indexer calls at 32K FP8 rows, b = 32 / 64 / 128 (idx_ab.py, the package against a copy of its own
# indexer.py: two timings of the same kernels, alternated). Output under $OUT: anchors.log, bench.json,
# bi_cost.json, dense.json, idx.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_anchors_now.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-400}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  step 90 python3 -m wavemla.cli bench --reps 15 --json "$OUT/bench.json" --label "${1:-unknown}"
  step 90 python3 benchmarks/bi_cost.py --batch 32 64 96 128 133 148 200 256 --reps 10 --json "$OUT/bi_cost.json"
  cp src/wavemla/kernels/indexer.py /tmp/indexer_copy.py
  step 120 python3 benchmarks/experiments/idx_ab.py "$OUT/idx.json" /tmp/indexer_copy.py 32:32768 64:32768 128:32768
  step 90 python3 -m wavemla.cli bench --dense --batch 32 128 --seqlen 4096 --heads 64 --kv-formats bf16 --reps 15 \
    --json "$OUT/dense.json" --label "${1:-unknown}"
} 2>&1 | quiet | tee "$OUT/anchors.log" | tail -70
