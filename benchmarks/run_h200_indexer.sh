#!/usr/bin/env bash
# Lightning indexer on the GPU: its GPU tests, the benchmark grid (JSON under $OUT) and the sanitizer passes that
# cover its kernels (memcheck with graphs and eager, racecheck through the CSA stress mode).
#   bash benchmarks/run_h200_indexer.sh
set -uo pipefail
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
timeout 240 python3 -m pytest tests/kernels/test_indexer.py tests/tools/test_bench_indexer.py -q -p no:cacheprovider \
  2>&1 | tail -3 | tee "$OUT/indexer-tests.log"
echo "tests rc=${PIPESTATUS[0]}" | tee -a "$OUT/indexer-tests.log"  # 124: cut at 240 s (no summary above)
timeout 420 python3 -m wavemla.tools.bench_indexer "$OUT/indexer.json" > "$OUT/indexer-bench.log" 2>&1
echo "bench rc=$?"
SANITIZERS="memcheck-csa memcheck-exact-csa racecheck-csa" RACECHECK_LIMIT=120 bash benchmarks/sanitizers.sh
grep -E "^triton" "$OUT/indexer-bench.log" | awk '{print}' | tail -48
