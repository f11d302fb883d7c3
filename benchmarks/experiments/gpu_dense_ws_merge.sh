#!/usr/bin/env bash
# GPU: the dense warp-specialized kernel merging cut requests itself (WAVEMLA_DENSE_WS_MERGE, in the kernel of commit
# c01760f only: measured slower than the combine kernel at every shape and reverted; docs/dense-decode.md, "Tried and
# not kept"): its GPU tests and the dense ones around it, `wavemla bench --dense` as planned (merge on) and with the
# knob off, two rounds alternated (bf16, h = 64 and 128, b = 8..128, s_k 4K and 16K, uniform and skewed lengths;
# each record also times the call with the schedule reused), `wavemla stress --mode dense`, and compute-sanitizer
# memcheck and racecheck over a merging test case.
#   BUDGET=560 bash benchmarks/experiments/gpu_dense_ws_merge.sh SHA   (writes dense-merge-*.json under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-560}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
W="python3 -m wavemla.cli"
{
machine "$SHA"
step 150 python3 -m pytest -q -p no:cacheprovider -n 16 tests/kernels/test_dense_decode.py \
  tests/kernels/test_dense_decode_ws.py tests/kernels/test_combine.py tests/test_plan_dense.py
for round in 1 2; do
  for m in on off; do
    WAVEMLA_DENSE_WS_MERGE=$m step 90 $W bench --dense --kv-formats bf16 --batch 8 32 64 128 --seqlen 4096 16384 \
      --heads 64 128 --lengths uniform skewed --reps 10 --json "$OUT/dense-merge-$m-$round.json" --label "$SHA"
  done
done
step 40 $W stress --mode dense --heads 64 --seqlen 4096 --replays 2000
step 60 compute-sanitizer --error-exitcode 99 --tool memcheck python3 -m pytest -q -p no:cacheprovider \
  tests/kernels/test_dense_decode.py -k "merge_in_kernel and (b2-9parts or s2-h64)"
step 80 compute-sanitizer --error-exitcode 99 --tool racecheck --racecheck-report hazard python3 -m pytest -q \
  -p no:cacheprovider tests/kernels/test_dense_decode.py -k "merge_in_kernel and b2-9parts"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/dense_ws_merge.log"
grep -E "^== |passed|failed|mismatch|ERROR SUMMARY|RACECHECK SUMMARY|hazard|ceilings" "$OUT/dense_ws_merge.log" \
  | sort | uniq -c | sort -rn | head -24 | cut -c1-200
python3 benchmarks/experiments/dense_merge_table.py "$OUT" 2>&1 | tail -40
