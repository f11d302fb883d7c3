#!/usr/bin/env bash
# GPU: compute-sanitizer racecheck over ws_sanitizer_probe.py's three warp_specialize controls (the last with an
# mbarrier handoff through shared memory), then the negative control plainly and under ConSan (a fresh Triton cache: the cache
# key does not tell an instrumented build from a plain one), which must stop with ConSan's report.
#   BUDGET=300 bash benchmarks/experiments/gpu_ws_controls.sh SHA      (writes ws_controls.log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-300}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
{
machine "$SHA"
step 120 compute-sanitizer --tool racecheck --racecheck-report hazard \
  python3 benchmarks/experiments/ws_sanitizer_probe.py control
step 60 python3 benchmarks/experiments/ws_sanitizer_probe.py racy
TRITON_CACHE_DIR=$(mktemp -d) TRITON_INSTRUMENTATION_MODE=consan CUDA_LAUNCH_BLOCKING=1 \
  step 150 python3 benchmarks/experiments/ws_sanitizer_probe.py consan racy
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/ws_controls.log"
cut -c1-300 "$OUT/ws_controls.log" | tail -60
