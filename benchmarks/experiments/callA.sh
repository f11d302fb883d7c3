# One GPU call: indexer lane (tests, benchmark, sanitizers), indexer breakdown and select-chunk sweep, and the
# batch-invariant-pieces branch check (.bi = `git archive batch-invariant-pieces`, extracted before the call).
set -uo pipefail
bash benchmarks/run_h200_indexer.sh
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python3 benchmarks/experiments/idx_prof.py 64:32768:fp8q 128:262144:fp8q 64:32768:bf16 \
  64:32768:fp8q:128,4,5,1024 64:32768:fp8q:128,4,5,8192 128:262144:fp8q:128,4,5,4096 128:262144:fp8q:128,4,5,65536 \
  2>&1 | grep -v Warn | tee $OUT/idx_prof5.log
cd .bi && OUT=$OUT/bi BUDGET=165 bash benchmarks/run_h200_invariant.sh bi-pieces-7d97e8e
