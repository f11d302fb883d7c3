#!/usr/bin/env bash
# The checks owed on a change of the warp-specialized sparse kernel: the sparse GPU tests (both kernels, batch
# invariance, launch replays, determinism, numerics, hostile inputs, the FlashMLA-compatible call), compute-sanitizer
# memcheck over the kernel's GPU tests and racecheck over its CSA b=8 cases, then `wavemla stress` (default shapes).
# Usage: bash benchmarks/experiments/gpu_ws_checks.sh SHA   (writes under $OUT)
set -uo pipefail
OUT=${OUT:-$PWD/ws-checks-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
LOG=$OUT/ws-checks.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$LOG"
echo "commit ${1:-unlabelled}" | tee -a "$LOG"
timeout "${TEST_LIMIT:-250}" python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_sparse_decode_ws.py \
  tests/kernels/test_batch_invariance.py tests/kernels/test_launch.py tests/kernels/test_determinism.py \
  tests/kernels/test_numerics.py tests/kernels/test_combine.py tests/test_hostile_inputs.py tests/test_flash_mla.py \
  -q -n 12 -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "tests rc=$? $(grep -E 'passed|failed' "$OUT/tests.log" | tail -1)" | tee -a "$LOG"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -20 | tee -a "$LOG"
timeout "${SAN_LIMIT:-130}" compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest \
  tests/kernels/test_sparse_decode_ws.py -q -p no:cacheprovider -p no:xdist > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1) $(grep -E 'passed|failed' "$OUT/memcheck.log" | tail -1)" \
  | tee -a "$LOG"
timeout "${RACE_LIMIT:-100}" compute-sanitizer --tool racecheck --racecheck-report hazard python3 -m pytest \
  tests/kernels/test_sparse_decode_ws.py -q -p no:cacheprovider -p no:xdist -k "csa-b8 or no-sink" > "$OUT/racecheck.log" 2>&1
echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck.log" | tail -1) $(grep -E 'passed|failed' "$OUT/racecheck.log" | tail -1)" \
  | tee -a "$LOG"
grep -oE "(RAW|WAR|WAW) hazard detected at __shared__ 0x[0-9a-f]+" "$OUT/racecheck.log" | sort | uniq -c | head -12 \
  | tee -a "$LOG"
timeout "${STRESS_LIMIT:-80}" python3 -m wavemla.tools.stress --replays "${REPLAYS:-3000}" > "$OUT/stress.log" 2>&1
echo "stress rc=$? $(tail -2 "$OUT/stress.log" | tr '\n' ' ')" | tee -a "$LOG"
