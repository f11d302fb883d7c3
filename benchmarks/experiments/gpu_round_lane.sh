#!/usr/bin/env bash
# GPU: the whole GPU test lane on a cold machine (every test natively with one worker per core, the stress tests
# alone after it) and the demos (sparse, then dense); nothing else, so the lane has the call to itself.
#   BUDGET=570 bash benchmarks/experiments/gpu_round_lane.sh <git-sha>   (writes under $OUT)
# A cold lane needs more than one call: LANE_SHARD=1/2 in one call, LANE_SHARD=2/2 (with the stress tests) in the next.
set -uo pipefail
BUDGET=${BUDGET:-570}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
SKIP_BENCH=1 step 520 bash benchmarks/gpu_lane.sh "${1:-unlabelled}"
step 40 python3 -m wavemla.cli demo
step 40 python3 -m wavemla.cli demo --dense
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/lane.log"
grep -E "^== |passed|failed|FAILED|error|result" "$OUT/lane.log" | cut -c1-170
