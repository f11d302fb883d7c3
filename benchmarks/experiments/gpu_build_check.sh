#!/usr/bin/env bash
# GPU: a build's kernel tests where its kernels changed (the sparse decode's split kernels, merges and combine, the
# prefill, FP8 rows, batch invariance, the API), the demo, FlashMLA's anchor shapes and the dense aim's bf16 points.
#   BUDGET=570 bash benchmarks/experiments/gpu_build_check.sh <git-sha>   (writes under $OUT)
# TESTS (paths separated by blanks or newlines) replaces the test files; EXTRA_TESTS adds to them; TEST_LIMIT (s,
# default 330) bounds the test step.
set -uo pipefail
BUDGET=${BUDGET:-570}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-unknown}
{
machine "$SHA"
TESTS=${TESTS:-"tests/kernels/test_numerics.py tests/kernels/test_combine.py tests/kernels/test_sparse_decode.py
tests/kernels/test_sparse_decode_ws.py tests/kernels/test_sparse_prefill.py tests/kernels/test_fp8.py
tests/kernels/test_batch_invariance.py tests/test_api.py"}
TEST_PATHS="$TESTS ${EXTRA_TESTS:-}" SKIP_STRESS=1 SKIP_BENCH=1 step "${TEST_LIMIT:-330}" bash benchmarks/gpu_lane.sh "$SHA"
step 40 python3 -m wavemla.cli demo
step 90 python3 -m wavemla.cli bench --mode csa hca --batch 1 8 32 64 128 256 --reps 15 --json "$OUT/bench.json" \
  --label "$SHA"
step 60 python3 -m wavemla.cli bench --dense --batch 32 128 --seqlen 4096 --heads 64 --kv-formats bf16 \
  --lengths uniform --reps 15 --json "$OUT/dense_aim.json" --label "$SHA"
} 2>&1 | quiet > "$OUT/build_check.log"
grep -E "^== |passed|failed|error|ceilings|^ *(csa|hca|dense)|µs" "$OUT/build_check.log" | cut -c1-170 | tail -60
