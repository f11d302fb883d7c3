#!/usr/bin/env bash
# DeepSeek-V3.2's sparse decode (q 576 wide) through the sparse call: its tests, its list and sink kernels', the
# API's, the engine stand-ins' and the launch replays' (mask lists' included) on the GPU, `wavemla demo --v32`, then
# v32_sparse_bench.py (h = 128, 2048 entries, b = 1..128, s_q = 1 and 2). Where a base tree has been unpacked into
# old-src/ (git archive BASE src | tar -x -C old-src), the bench runs on it too, alternated with this tree's (new,
# old, new): an A/B on one machine. Then, in what is left of the budget, the sanitizers' memcheck-v32 step. Output
# under $OUT: v32.log, v32-{new,old}-N.json, sanitizers.{log,txt}.
#   OUT=/some/dir bash benchmarks/experiments/gpu_v32_sparse.sh <git-sha> [<base-sha>]
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
B=benchmarks/experiments/v32_sparse_bench.py
{
  machine "${1:-unknown}"
  step 180 python3 -m pytest tests/test_sparse_v32.py tests/kernels/test_v32_lists.py tests/test_api.py \
    tests/test_flash_mla.py tests/test_plugins.py tests/kernels/test_mask_lists.py tests/kernels/test_launch.py \
    tests/reference -q -p no:cacheprovider $X
  step 60 python3 -m wavemla demo --v32
  step 110 python3 $B --json "$OUT/v32-new-1.json"
  if [ -d old-src/src ]; then
    echo "== base tree: ${2:-unknown}"
    PYTHONPATH=$PWD/old-src/src step 110 python3 $B --json "$OUT/v32-old-1.json"
    step 110 python3 $B --json "$OUT/v32-new-2.json"
  fi
  SANITIZERS=memcheck-v32 MEMCHECK_LIMIT=$((END - SECONDS - 5)) step 150 bash benchmarks/sanitizers.sh
} 2>&1 | quiet > "$OUT/v32.log"
cat "$OUT/v32.log"
