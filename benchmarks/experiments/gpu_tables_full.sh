# GPU: the sparse-decode kernel tests, then the s_q=2 (CSA, HCA) and h=16/128 (CSA) tables at every anchor batch size
# b = 1, 8, 32, 48, 64, 80, 96, 128, 148, 256.
#   bash benchmarks/experiments/gpu_tables_full.sh <git-sha>   (writes under $OUT; about 4 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
X=""; python3 -c "import xdist" 2>/dev/null && X="-n 8"
B="1 8 32 48 64 80 96 128 148 256"
{
timeout 200 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_batch_invariance.py tests/kernels/test_determinism.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider 2>&1 | grep -E "passed|failed|FAILED|Error" | tail -8
timeout 100 python3 -m wavemla.cli bench --mode csa hca --s-q 2 --heads 64 --batch $B --reps 15 \
  --json "$OUT/bench_h64_s2.json" --label "${1:-unlabelled}" 2>&1 | grep -E "^(csa|hca)|ceilings"
timeout 100 python3 -m wavemla.cli bench --mode csa --s-q 1 --heads 16 128 --batch $B --reps 15 \
  --json "$OUT/bench_h16_h128.json" --label "${1:-unlabelled}" 2>&1 | grep -E "^(csa|hca)|ceilings"
} 2>&1 | tee "$OUT/tables.log"
