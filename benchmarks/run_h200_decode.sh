#!/usr/bin/env bash
# The sparse-decode part of the H200 run, sized for one 10-minute call (about 8 minutes; the test lane took its
# whole 220 s on a cold machine once, so it has 300): GPU tests of the kernels, demo, the
# sparse-decode tables (h=64 s_q 1/2, h=16/128), batch-invariant cost, stress (graphs x streams), the b = 1..256 curves
# (CSA and HCA, h=64).
#   bash benchmarks/run_h200_decode.sh <git-sha>
set -uo pipefail
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
LABEL=${1:-unlabelled}
W="python3 -m wavemla.cli"
step() { local limit=$1; shift; echo "== $* (limit ${limit}s)"; timeout "$limit" "$@"; echo "== exit $?"; }
{
  # gpu_lane.sh runs tests/tools/test_stress.py on its own after the parallel step: naming it here would put it
  # beside the other pytest workers, where it crashes (docs/reliability.md)
  TEST_PATHS="tests/kernels/test_sparse_decode.py tests/kernels/test_numerics.py tests/kernels/test_batch_invariance.py tests/kernels/test_determinism.py tests/kernels/test_indexer.py tests/test_device.py" \
    SKIP_BENCH=1 step 300 bash benchmarks/gpu_lane.sh "$LABEL"
  step 40 $W demo
  step 100 $W bench --mode csa hca --s-q 1 --heads 64 --batch 1 8 32 48 64 80 96 128 148 256 --reps 30 \
    --json "$OUT/bench_h64.json" --label "$LABEL"
  step 60 $W bench --mode csa hca --s-q 2 --heads 64 --batch 1 32 64 96 128 256 --reps 15 \
    --json "$OUT/bench_h64_s2.json" --label "$LABEL"
  step 60 $W bench --mode csa --s-q 1 --heads 16 128 --batch 1 32 64 96 128 256 --reps 15 \
    --json "$OUT/bench_h16_h128.json" --label "$LABEL"
  step 45 python3 benchmarks/bi_cost.py --batch 1 32 64 128 256 --reps 15 --json "$OUT/bi_cost.json"
  step 45 $W stress
  step 70 $W bench --mode csa --s-q 1 --heads 64 --batch $(seq 1 256) --reps 5 \
    --json "$OUT/curve_h64.json" --label "$LABEL" > "$OUT/curve.log"
  step 80 $W bench --mode hca --s-q 1 --heads 64 --batch $(seq 1 256) --reps 5 \
    --json "$OUT/curve_h64_hca.json" --label "$LABEL" > "$OUT/curve_hca.log"
} > "$OUT/all.log" 2>&1
tar czf /tmp/wavemla-results.tgz -C "$OUT" --exclude=all.log --exclude=tests.log . && \
  find "$OUT" -mindepth 1 -maxdepth 1 ! -name all.log ! -name tests.log -exec rm -rf {} + && \
  mv /tmp/wavemla-results.tgz "$OUT/results.tgz"
grep -E "^== |passed|failed|result:|time:|ceilings|mismatch|MISMATCH" "$OUT/all.log" | head -60
grep -E "^(csa|hca) |ratio" "$OUT/all.log" | cut -c1-150
