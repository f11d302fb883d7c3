#!/usr/bin/env bash
# GPU: the warp-specialized sm_90 kernels under Triton's concurrency sanitizer (ws_sanitizer_probe.py consan): the
# sparse kernel's default and batch-invariant launches and the dense kernel, in three processes at once (each
# instrumented build compiles for minutes); first compute-sanitizer racecheck over ws_sanitizer_probe.py's controls.
#   BUDGET=580 bash benchmarks/experiments/gpu_consan.sh SHA      (writes consan-*.log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-580}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
{ machine "$SHA"
  echo "== racecheck over the warp_specialize controls"
  compute-sanitizer --tool racecheck --racecheck-report hazard \
    python3 benchmarks/experiments/ws_sanitizer_probe.py control 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" \
    | head -40
} > "$OUT/consan-machine.log" 2>&1
for what in sparse pieces dense; do
  (TRITON_INSTRUMENTATION_MODE=consan CUDA_LAUNCH_BLOCKING=1 TRITON_CACHE_DIR=/tmp/consan-cache-$what \
    timeout $((BUDGET - 60)) python3 benchmarks/experiments/ws_sanitizer_probe.py consan $what; echo "exit $?") \
    > "$OUT/consan-$what.log" 2>&1 &
done
wait
cat "$OUT/consan-machine.log"
for what in sparse pieces dense; do
  echo "== $what"; grep -v -E "Warning[:(]|warner\(|warn_once" "$OUT/consan-$what.log" | tail -12 | cut -c1-300
done
