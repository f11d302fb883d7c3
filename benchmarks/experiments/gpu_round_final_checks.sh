# GPU: the indexer's GPU tests (both select paths) and compute-sanitizer memcheck over the per-token select (the
# small CSA stress runs the indexer in its graphs) and over the dense decode's new row path.
#   bash benchmarks/experiments/gpu_round_final_checks.sh   (writes under $OUT; about 4 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
X=""; python3 -c "import xdist" 2>/dev/null && X="-n 8"
timeout 110 python3 -m pytest tests/kernels/test_indexer.py -m gpu -q $X -p no:cacheprovider 2>&1 \
  | grep -E "passed|failed|FAILED|Error" | tail -6 | tee "$OUT/idx_tests.log"
SANITIZERS="memcheck-exact-csa memcheck-dense" MEMCHECK_LIMIT=85 bash benchmarks/sanitizers.sh
