#!/usr/bin/env bash
# The listed select of the lightning indexer on one GPU: its GPU tests and launch replays, its bits against the
# per-token select (idx_spread_check.py) and under compute-sanitizer memcheck, then the listed, spread and
# per-token selects timed side by side (idx_select.py: CUDA-graph replay, L2 flushed, copy ceiling in the same run).
# Output under $OUT: idx_listed.log, idx_listed.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_listed.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
F='Warning[:(]|warner\('
SHAPES=${SHAPES:-"32:32768:fp8-paged 64:32768:fp8-paged 128:32768:fp8-paged 32:32768:bf16 64:32768:bf16
  1:32768:fp8-paged 8:32768:fp8-paged 16:32768:fp8-paged 32:2048:fp8-paged 128:2048:fp8-paged"}
{
  machine "${1:-}"
  step 150 python3 -m pytest tests/kernels/test_indexer.py -m gpu -k listed -q -p no:cacheprovider $X
  step 60 python3 -m pytest tests/kernels/test_launch.py -m gpu -k indexer_replay -q -p no:cacheprovider
  step 60 python3 benchmarks/experiments/idx_spread_check.py
  # shellcheck disable=SC2086
  step 240 python3 benchmarks/experiments/idx_select.py "$OUT/idx_listed.json" --reps 15 --shapes $SHAPES \
    --paths ${PATHS:-listed spread token}
  step 90 compute-sanitizer --error-exitcode 3 --tool memcheck python3 benchmarks/experiments/idx_spread_check.py
} 2>&1 | grep -v -E "$F" | tee "$OUT/idx_listed.log" | grep -E "^==|passed|failed|us \(|identical|DIFFER|==|!=|copy|ERROR" \
  | tail -60
