#!/usr/bin/env bash
# racecheck over the warp-specialized sm_90 kernels, every hazard printed and sorted by `wavemla racecheck` (the
# racecheck-dense and racecheck-ws steps of benchmarks/sanitizers.sh), then the dense decode's bf16 h = 16, b = 32,
# 16K-key call timed whole, with the schedule reused and launch by launch, on the 16x16 and 16x32 row tiles, in two
# rounds (on an H100 SXM the whole call measured 22-25 µs above its launches' sum there).
# Output under $OUT: racecheck.log (this script's log), sanitizers.{log,txt}, h16_probe_{1,2}.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_racecheck_classes.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  compute-sanitizer --version | tail -1
  compute-sanitizer --help 2>&1 | grep -A1 -- "--print-limit"
  SANITIZERS="racecheck-dense racecheck-ws" RACECHECK_LIMIT=200 step 420 bash benchmarks/sanitizers.sh
  for round in 1 2; do
    step 90 python3 -m wavemla.cli bench --dense --batch 32 --seqlen 16384 --heads 16 --kv-formats bf16 \
      --configs 16x16x4x3 16x32x4x3 --reps 30 --json "$OUT/h16_probe_$round.json"
  done
} 2>&1 | quiet > "$OUT/racecheck.log"
grep -E "^== |^racecheck|Version|print-limit|^dense |ceiling" "$OUT/racecheck.log" | cut -c1-260 | tail -40
