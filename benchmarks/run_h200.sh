#!/usr/bin/env bash
# The full H200 run behind BENCHMARKS.md: GPU test lane, demo, sparse-decode tables (h=64 s_q 1/2; h=16/128),
# the b = 1..256 curve, and the indexer benchmark. Writes JSON and logs under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
LABEL=${1:-unlabelled}
BATCHES="1 8 32 48 64 80 96 128 148 256"
{
  TEST_PATHS="tests/kernels tests/reference tests/test_device.py" SKIP_BENCH=1 bash benchmarks/gpu_lane.sh "$LABEL"
  python3 -m wavemla.cli demo
  python3 -m wavemla.cli bench --mode csa hca --s-q 1 2 --heads 64 --batch $BATCHES --reps 30 \
    --json "$OUT/bench_h64.json" --label "$LABEL"
  python3 -m wavemla.cli bench --mode csa hca --s-q 1 --heads 16 128 --batch $BATCHES --reps 30 \
    --json "$OUT/bench_h16_h128.json" --label "$LABEL"
  python3 -m wavemla.cli bench --mode csa hca --s-q 1 --heads 64 --batch $(seq 1 256) --reps 10 \
    --json "$OUT/curve_h64.json" --label "$LABEL" > "$OUT/curve.log"
  tail -3 "$OUT/curve.log"
  [ "${SKIP_INDEXER:-0}" = 1 ] || timeout 300 python3 -m wavemla.tools.bench_indexer "$OUT/indexer.json"
} > "$OUT/all.log" 2>&1
grep -E "passed|failed|result:|time:|ceilings" "$OUT/all.log"
grep -E "^(csa|hca)" "$OUT/all.log" | cut -c1-150
