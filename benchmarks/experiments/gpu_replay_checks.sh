#!/usr/bin/env bash
# The kernel lane on the build with launch replays (every kernel test natively; no stress, no benchmark), then
# compute-sanitizer memcheck over the replay tests (tests/kernels/test_launch.py: replayed launches of the sparse,
# dense, combine and indexer kernels against Triton's path, in and out of CUDA graphs). MEMCHECK_TESTS (a
# space-separated list of test files) runs memcheck over those instead, e.g. "tests/kernels/test_launch.py
# tests/kernels/test_sparse_decode_ws.py".
# Usage: bash benchmarks/experiments/gpu_replay_checks.sh SHA   (writes under $OUT)
set -uo pipefail
OUT=${OUT:-$PWD/replay-checks-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
LANE_LIMIT=${LANE_LIMIT:-400}
OUT=$OUT TEST_PATHS="tests/kernels tests/reference tests/test_device.py" SKIP_STRESS=1 SKIP_BENCH=1 \
  timeout "$LANE_LIMIT" bash benchmarks/gpu_lane.sh "${1:-unlabelled}" > "$OUT/lane.txt" 2>&1
echo "lane exit: $?" >> "$OUT/lane.txt"
grep -E "passed|failed|error|FAILED|lane exit|tests exit" "$OUT/lane.txt" | tail -15
read -r -a MEMCHECK <<< "${MEMCHECK_TESTS:-tests/kernels/test_launch.py}"
timeout "${SAN_LIMIT:-150}" compute-sanitizer --error-exitcode 99 --tool memcheck \
  python3 -m pytest "${MEMCHECK[@]}" -q -p no:cacheprovider -p no:xdist > "$OUT/memcheck-launch.log" 2>&1
echo "memcheck over ${MEMCHECK[*]}: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck-launch.log" | tail -1)" \
  | tee -a "$OUT/memcheck-launch.log"
grep -E "passed|failed" "$OUT/memcheck-launch.log" | tail -2
gzip -kf "$OUT/tests.log" 2>/dev/null
