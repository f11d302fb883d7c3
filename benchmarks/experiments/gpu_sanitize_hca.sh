# Sanitizers on the current kernels (the batch-invariant in-program merge, dense decode, default sparse decode with
# the indexer under graphs) and then the HCA piece-count sweep of batch-invariant mode.
#   bash benchmarks/experiments/gpu_sanitize_hca.sh   (writes under $OUT)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
SANITIZERS="memcheck-merge racecheck-merge memcheck-dense racecheck-dense memcheck-csa racecheck-csa" \
  RACECHECK_LIMIT=90 bash benchmarks/sanitizers.sh
timeout 100 python3 benchmarks/experiments/bi_sweep.py --mode hca --options 64:2,64:3,64:6 --json "$OUT/bi_sweep_hca.json" \
  2>&1 | grep -v Warn | tee "$OUT/bi_sweep_hca.log"
