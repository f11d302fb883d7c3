#!/usr/bin/env bash
# The package's spread plans (whole tokens first, the leftover spread past a perfect fit: Plan.whole_units) on the
# H200: the warp-specialized kernel's and the split kernels' GPU tests, the spread tests through the API, the
# launch-replay tests (a fresh metadata object captured in a CUDA graph among them), stress replays of a spread
# batch against eager calls, compute-sanitizer memcheck over one spread call, then spread_ab.py at every spread point
# of the H200 curves against the uniform plan and the perfect fit before it. Output under $OUT: spread.log,
# spread_ab.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_spread_package.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-570}
source benchmarks/budget.sh
{
  machine "$1"
  step 200 python3 -m pytest tests/kernels/test_sparse_decode_ws.py tests/kernels/test_launch.py \
    "tests/kernels/test_sparse_decode.py" -k "spread or ws or fresh or replay" -q -p no:cacheprovider $X
  step 60 python3 -m wavemla.tools.stress --mode csa --batch 133 134 --replays 2000
  step 60 compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest -q -p no:cacheprovider \
    tests/kernels/test_sparse_decode.py -k spread_plan
  step 230 python3 benchmarks/experiments/spread_ab.py "$OUT/spread_ab.json" --rounds 3 --reps 10
} 2>&1 | quiet | tee "$OUT/spread.log" | tail -60
