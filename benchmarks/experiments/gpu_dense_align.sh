#!/usr/bin/env bash
# GPU: the dense scheduler's aligned partition (a part per request, none cut, where the planner's price of cutting
# says so; WAVEMLA_DENSE_ALIGN): the dense GPU tests, then `wavemla bench --dense` as planned and with the knob off,
# two rounds alternated, at the batches a little under the part count (h = 64: 132 parts; h = 128: 66) and around
# them (bf16, uniform lengths; skewed lengths at h = 64 b = 128, which stay balanced), and a dense stress run.
#   BUDGET=420 bash benchmarks/experiments/gpu_dense_align.sh SHA   (writes dense-align-*.json under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
W="python3 -m wavemla.cli"
bench() {  # bench NAME ARGS...
  local name=$1; shift
  step 60 $W bench --dense --kv-formats bf16 --reps 10 "$@" --json "$OUT/$name.json" --label "$SHA"
}
{
machine "$SHA"
step 120 python3 -m pytest -q -p no:cacheprovider -n 16 tests/kernels/test_dense_decode.py \
  tests/kernels/test_dense_decode_ws.py tests/test_plan_dense.py
for round in 1 2; do
  for a in auto off; do
    WAVEMLA_DENSE_ALIGN=$a bench "dense-align-$a-$round-h64" --heads 64 --batch 108 116 124 128 132 133 \
      --seqlen 4096 --lengths uniform
    WAVEMLA_DENSE_ALIGN=$a bench "dense-align-$a-$round-h64-16k" --heads 64 --batch 128 --seqlen 16384 \
      --lengths uniform skewed
    WAVEMLA_DENSE_ALIGN=$a bench "dense-align-$a-$round-h128" --heads 128 --batch 56 60 64 66 --seqlen 4096 \
      --lengths uniform
  done
done
step 40 $W stress --mode dense --heads 64 --seqlen 4096 --replays 2000
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/dense_align.log"
grep -E "^== |passed|failed|mismatch|ceilings" "$OUT/dense_align.log" | cut -c1-200
python3 benchmarks/experiments/dense_align_table.py "$OUT" 2>&1 | tee -a "$OUT/dense_align.log" | tail -40
# one file for the JSONs: a call brings back at most 8 files
tar czf "$OUT/dense-align-json.tar.gz" -C "$OUT" $(cd "$OUT" && ls dense-align-*.json) && rm -f "$OUT"/dense-align-*.json
