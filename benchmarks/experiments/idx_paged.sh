# GPU check of the page-split FP8 layout: indexer tests, its breakdown next to per-row scales, then the full
# indexer lane (benchmark grid with the fp8-paged rows, sanitizers): bash benchmarks/experiments/idx_paged.sh
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
E=benchmarks/experiments
timeout 150 python3 $E/idx_prof.py 64:32768:fp8qp 64:32768:fp8q 128:262144:fp8qp 128:262144:fp8q 32:32768:fp8qp \
  2>&1 | grep -v Warn | tee $OUT/idx_paged.log
bash benchmarks/run_h200_indexer.sh
