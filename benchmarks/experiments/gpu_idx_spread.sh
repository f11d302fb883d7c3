#!/usr/bin/env bash
# The spread select of the lightning indexer on one GPU: the indexer's GPU tests (every select path), the spread
# select against the per-token one under compute-sanitizer memcheck and racecheck, then every select path timed
# (benchmarks/experiments/idx_select.py: CUDA-graph replay, L2 flushed, copy ceiling in the same run). Output under
# $OUT: idx_spread-tests.log, idx_spread-sanitizers.log, idx_select.{json,log}.
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_spread.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
echo "commit ${1:-unknown}"
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader 2>&1 | head -1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
F='Warning[:(]|warner\('
step 150 python3 -m pytest tests/kernels/test_indexer.py -m gpu -q -p no:cacheprovider $X 2>&1 | grep -v -E "$F" \
  | tail -4 | tee "$OUT/idx_spread-tests.log"
CS="compute-sanitizer --error-exitcode 3"
{
  step 150 python3 benchmarks/experiments/idx_spread_check.py
  step 90 $CS --tool memcheck python3 benchmarks/experiments/idx_spread_check.py
  step 120 $CS --tool racecheck --racecheck-report hazard python3 benchmarks/experiments/idx_spread_check.py
} 2>&1 | grep -v -E "$F" | tee "$OUT/idx_spread-sanitizers.log" | tail -20
step 240 python3 benchmarks/experiments/idx_select.py "$OUT/idx_select.json" --reps 15 2>&1 | grep -v -E "$F" \
  | tee "$OUT/idx_select.log"
