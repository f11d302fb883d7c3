#!/usr/bin/env bash
# Launch replays (wavemla.kernels.launch) on the H200, in one call: the kernel lane (every kernel test natively,
# the replay tests among them; no stress, no benchmark), then the host time per decode call with every launch
# through Triton's path and with launches replayed (benchmarks/experiments/host_breakdown.py).
# Usage: bash benchmarks/experiments/gpu_launch_replay.sh SHA   (writes under $OUT)
set -uo pipefail
OUT=${OUT:-$PWD/launch-replay-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
LANE_LIMIT=${LANE_LIMIT:-470}
OUT=$OUT TEST_PATHS="tests/kernels tests/reference tests/test_device.py" SKIP_STRESS=1 SKIP_BENCH=1 \
  timeout "$LANE_LIMIT" bash benchmarks/gpu_lane.sh "${1:-unlabelled}" > "$OUT/lane.txt" 2>&1
echo "lane exit: $?" >> "$OUT/lane.txt"
grep -E "passed|failed|error|FAILED|lane exit|tests exit" "$OUT/lane.txt" | tail -15
timeout 80 python3 benchmarks/experiments/host_breakdown.py --calls 300 --json "$OUT/host-replay.json" 2>&1 \
  | tee "$OUT/host.log"
gzip -kf "$OUT/tests.log" 2>/dev/null
