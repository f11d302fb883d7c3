# GPU: kernel tests, the one-load combine against the previous loop over pieces (":loop-combine", from
# benchmarks/experiments/variants/ — carry it), the h=64 anchor table, memcheck over the new combine.
#   bash benchmarks/experiments/materialize.sh; then on the GPU: bash benchmarks/experiments/gpu_combine.sh
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
X=""; python3 -c "import xdist" 2>/dev/null && X="-n 8"
{
timeout 200 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_determinism.py tests/kernels/test_batch_invariance.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider 2>&1 | tail -2
echo "## partition_sweep: one-load combine vs loop (reps 30)"
timeout 150 python3 benchmarks/experiments/partition_sweep.py --reps 30 --json "$OUT/combine.json" --points \
  csa:1:default csa:1:default:loop-combine csa:8:default csa:8:default:loop-combine \
  csa:32:default csa:32:default:loop-combine hca:1:default hca:1:default:loop-combine \
  hca:8:default hca:8:default:loop-combine csa:32:default csa:32:default:loop-combine 2>&1 | grep -v -i warn
echo "## bench h64 (reps 30)"
timeout 100 python3 -m wavemla.cli bench --mode csa hca --s-q 1 --heads 64 --batch 1 8 32 48 64 80 96 128 148 256 --reps 30 \
  --json "$OUT/bench_h64.json" --label one-load-combine 2>&1 | grep -E "^(csa|hca)|ceilings"
echo "## compute-sanitizer memcheck: the combine (CSA b=1, 8, 32; HCA b=1)"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 python3 benchmarks/experiments/partition_sweep.py --reps 2 \
  --points csa:1:default csa:8:default csa:32:default hca:1:default 2>&1 | grep -E "ERROR SUMMARY|Invalid|^csa|^hca" | head -20
} 2>&1 | tee "$OUT/combine.log"
