#!/usr/bin/env bash
# The GPU lane: GPU-marked tests plus every kernel test run natively, then the benchmark.
# Usage (on a CUDA machine, from the repository root):
#   bash benchmarks/gpu_lane.sh LABEL [wavemla bench arguments...]
# Writes tests.log, bench.json and bench.log under $OUT (default ./gpu-lane-out) and prints a short table last.
# LANE_WORKERS sets the pytest-xdist workers (default: one per core, up to 16). LANE_SHARD=i/n runs the i-th of n
# interleaved shares of the tests (the stress tests with the last; a file that fails to collect fails each share),
# for a lane split over n calls. TEST_PATHS (paths separated by blanks or newlines) runs those instead of tests/;
# SKIP_TESTS=1, SKIP_STRESS=1, SKIP_BENCH=1 leave steps out.
# PORTABLE_ARCHS="sm80 sm120" also runs the kernel tests (TEST_PATHS instead, where given) and the demo along those
# architectures' code paths (benchmarks/portable_gpu.sh: portable-<arch>.log); a failure there fails the lane.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
LABEL=${1:-unlabelled}
shift || true
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}

nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader | tee "$OUT/gpu.txt"
$PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"

TESTS_RC=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  # One worker per core, up to 16: compiling the kernels is most of a lane on a machine whose Triton cache is empty
  # (8 workers ran out of 430 s at 94% of the tests on a fresh 16-core H200 machine).
  XDIST=""
  WORKERS=$(nproc); [ "$WORKERS" -gt 16 ] && WORKERS=16
  $PY -c "import xdist" 2>/dev/null && XDIST="-n ${LANE_WORKERS:-$WORKERS}"
  # The stress tests drive several CUDA graphs on several streams each; they run alone, not beside other
  # pytest workers on the same GPU.
  # -v: a line per test (PASSED/FAILED with its name), so a lane cut by a time limit still names its failures;
  # --durations: the longest tests, which set a parallel lane's wall time when they start late
  # LANE_SHARD=i/n runs every n-th collected test from the i-th (1-based), the stress tests with shard n only: a cold
  # lane needs more than one 10-minute call (16 workers reached 1,124 of 1,142 tests in 520 s), so run it as n calls.
  # TEST_PATHS is a list of paths separated by blanks or newlines, each its own argument, not expanded as a pattern
  # (-d '': every line, not the first only; portable_gpu.sh splits it the same way)
  read -r -d '' -a SELECT <<< "${TEST_PATHS:-tests}"
  STRESS=$((1 - ${SKIP_STRESS:-0}))
  COLLECT_RC=0
  if [ -n "${LANE_SHARD:-}" ]; then
    I=${LANE_SHARD%/*}; N=${LANE_SHARD#*/}
    # A file that fails to collect fails the lane, as it does unsharded: its errors are kept for tests.log. Test ids
    # are the lines that start "path::" (an error's lines may hold "::" further in: "ERROR a.py::C - ...", "E   ...").
    $PY -m pytest --collect-only -q "${SELECT[@]}" -p no:cacheprovider --ignore=tests/tools/test_stress.py \
      ${TEST_ARGS:-} > "$OUT/lane_collect.txt" 2>/dev/null
    COLLECT_RC=$?
    grep -E '^[^[:space:]]+::' "$OUT/lane_collect.txt" | awk -v i="$I" -v n="$N" '(NR - i) % n == 0' \
      > "$OUT/lane_shard.txt"
    echo "lane shard $LANE_SHARD: $(wc -l < "$OUT/lane_shard.txt") tests"
    mapfile -t SELECT < "$OUT/lane_shard.txt"
    [ "$I" = "$N" ] || STRESS=0
  fi
  if [ "${#SELECT[@]}" -eq 0 ]; then  # an empty shard: pytest without paths would run every test
    TESTS_RC=5
    echo "no tests selected" > "$OUT/tests.log"
  else
    $PY -m pytest "${SELECT[@]}" -v --durations=40 $XDIST -p no:cacheprovider --ignore=tests/tools/test_stress.py \
      ${TEST_ARGS:-} 2>&1 | tee "$OUT/tests.log" | grep -v -E " PASSED| SKIPPED| XFAIL" | tail -25
    TESTS_RC=${PIPESTATUS[0]}  # 5: pytest collected nothing, a failure here
  fi
  if [ "$COLLECT_RC" != 0 ]; then  # 5 (nothing collected) left an empty shard: TESTS_RC is 5 already
    { echo "collection exit: $COLLECT_RC"; grep -E "^ERROR " "$OUT/lane_collect.txt"; } | tee -a "$OUT/tests.log"
    [ "$TESTS_RC" = 0 ] && TESTS_RC=$COLLECT_RC
  fi
  echo "tests exit: $TESTS_RC" | tee -a "$OUT/tests.log"
  if [ "$STRESS" = 1 ]; then
    $PY -m pytest tests/tools/test_stress.py -q -p no:cacheprovider -p no:xdist 2>&1 | tee -a "$OUT/tests.log" | tail -5
    STRESS_RC=${PIPESTATUS[0]}
    echo "stress exit: $STRESS_RC" | tee -a "$OUT/tests.log"
    [ "$TESTS_RC" = 0 ] && TESTS_RC=$STRESS_RC
  fi
fi

if [ -n "${PORTABLE_ARCHS:-}" ]; then  # e.g. "sm80 sm120": the kernel tests (or TEST_PATHS) and demo along those paths
  OUT="$OUT" ARCHS="$PORTABLE_ARCHS" bash benchmarks/portable_gpu.sh "$LABEL" 2>&1 | tail -40
  PORTABLE_RC=${PIPESTATUS[0]}
  echo "portable exit: $PORTABLE_RC" | tee -a "$OUT/tests.log"
  [ "$TESTS_RC" = 0 ] && TESTS_RC=$PORTABLE_RC
fi

if [ "${SKIP_BENCH:-0}" != 1 ]; then
  $PY -m wavemla.cli bench --json "$OUT/bench.json" --label "$LABEL" "$@" 2>&1 | tee "$OUT/bench.log"
fi
echo "== summary =="
grep -E "passed|failed|error" "$OUT/tests.log" 2>/dev/null | tail -3
for f in "$OUT"/portable-sm*.log; do [ -e "$f" ] && echo "$(basename "$f"): $(grep -E "passed|failed" "$f" | tail -1)"; done
grep -E "ceilings" "$OUT/bench.log" 2>/dev/null || true
exit "$TESTS_RC"  # the tests' status, then the stress tests', then the portable run's (non-zero when any failed or
# none were collected)
