# Per-kernel breakdown of indexer calls (the figures in BENCHMARKS.md "Indexer notes"): bash benchmarks/experiments/idx_breakdown.sh
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
E=benchmarks/experiments
timeout 200 python3 -m pytest tests/kernels/test_indexer.py -q -x -p no:cacheprovider 2>&1 | tail -3
timeout 300 python3 $E/idx_prof.py 32:32768:fp8q 64:32768:fp8q 64:32768:fp8 64:32768:bf16 128:32768:fp8q \
  128:262144:fp8q 128:262144:bf16 32:2048:fp8q 1:262144:fp8q 32:262144:fp8q 2>&1 | grep -v Warn | tee $OUT/idx_prof4.log
