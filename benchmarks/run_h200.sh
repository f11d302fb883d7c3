#!/usr/bin/env bash
# The full H200 run behind BENCHMARKS.md: GPU test lane, demo, sparse-decode tables, stress (graphs x streams),
# the DSV4-Flash layer benchmark with its trace fit, the b = 1..256 curve, the paged dense-decode grid, and short
# sanitizer passes.
# Writes JSON and logs under $OUT; each step has a time limit so the whole run fits one 10-minute call.
#   bash benchmarks/run_h200.sh <git-sha>
set -uo pipefail
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
LABEL=${1:-unlabelled}
W="python3 -m wavemla.cli"
step() { local limit=$1; shift; echo "== $* (limit ${limit}s)"; timeout "$limit" "$@"; echo "== exit $?"; }
{
  TEST_PATHS="tests/kernels tests/reference tests/test_device.py tests/tools/test_stress.py" \
    SKIP_BENCH=1 step 150 bash benchmarks/gpu_lane.sh "$LABEL"
  step 60 $W demo
  step 120 $W bench --mode csa hca --s-q 1 --heads 64 --batch 1 8 32 48 64 80 96 128 148 256 --reps 30 \
    --json "$OUT/bench_h64.json" --label "$LABEL"
  step 60 $W stress
  step 60 $W stress --batch-invariant --replays 2000
  step 200 $W layer-bench --out "$OUT/layer" --batch 1 16 32 64 96 128 --context 65536 --reps 10 --profile-steps 3
  step 30 $W trace "$OUT/layer/csa" --step-kernel '^_sparse_mla_decode(_ws)?_kernel$' --rules "$OUT/layer/layer_rules.json" \
    --json "$OUT/layer_csa_slope.json"
  step 100 $W bench --mode csa hca --s-q 2 --heads 64 --batch 1 32 64 96 128 256 --reps 20 \
    --json "$OUT/bench_h64_s2.json" --label "$LABEL"
  step 100 $W bench --mode csa --s-q 1 --heads 16 128 --batch 1 32 64 96 128 256 --reps 20 \
    --json "$OUT/bench_h16_h128.json" --label "$LABEL"
  step 80 $W bench --mode csa --s-q 1 --heads 64 --batch $(seq 1 256) --reps 5 \
    --json "$OUT/curve_h64.json" --label "$LABEL" > "$OUT/curve.log"
  step 300 $W bench --dense --batch 1 8 32 64 128 --seqlen 1024 4096 16384 65536 --heads 16 64 128 \
    --lengths uniform skewed --kv-formats bf16 fp8 --reps 10 --json "$OUT/bench_dense.json" --label "$LABEL"
  step 90 compute-sanitizer --tool memcheck --error-exitcode 1 python3 -m wavemla.cli stress --small --replays 20
} > "$OUT/all.log" 2>&1
# Few files come back from the GPU machine: pack the results (JSON, layer traces) into one archive.
tar czf /tmp/wavemla-results.tgz -C "$OUT" --exclude=all.log --exclude=tests.log . && \
  find "$OUT" -mindepth 1 -maxdepth 1 ! -name all.log ! -name tests.log -exec rm -rf {} + && \
  mv /tmp/wavemla-results.tgz "$OUT/results.tgz"
grep -E "^== |passed|failed|result:|time:|ceilings|mismatch|MISMATCH|ERROR SUMMARY|slope|driver" "$OUT/all.log" | head -80
grep -E "^(csa|hca)" "$OUT/all.log" | cut -c1-150
grep -E "^dense" "$OUT/all.log" | cut -c1-170
