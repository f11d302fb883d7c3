# GPU: kernel tests, the combine launched for programmatic dependent launch vs not (":no-pdl"), the h=64 anchor
# table, and compute-sanitizer over the q scratch rows and the dependent launch.
#   bash benchmarks/experiments/gpu_pdl.sh   (writes under $OUT; about 6 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
X=""; python3 -c "import xdist" 2>/dev/null && X="-n 8"
{
timeout 200 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_determinism.py tests/kernels/test_batch_invariance.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider 2>&1 | tail -2
echo "## partition_sweep: PDL vs not (reps 30)"
timeout 150 python3 benchmarks/experiments/partition_sweep.py --reps 30 --json "$OUT/pdl.json" --points \
  csa:1:default csa:1:default:no-pdl csa:8:default csa:8:default:no-pdl csa:32:default csa:32:default:no-pdl \
  hca:8:default hca:8:default:no-pdl hca:1:default hca:1:default:no-pdl csa:32:default csa:32:default:no-pdl 2>&1 | grep -v -i warn
echo "## bench h64 (reps 30)"
timeout 100 python3 -m wavemla.cli bench --mode csa hca --s-q 1 --heads 64 --batch 1 8 32 48 64 80 96 128 148 256 --reps 30 \
  --json "$OUT/bench_h64.json" --label pdl 2>&1 | grep -E "^(csa|hca)|ceilings"
echo "## compute-sanitizer memcheck: q scratch (64x64 upp 5, 16x32 upp 4) and the PDL combine (16x32)"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 python3 benchmarks/experiments/partition_sweep.py --reps 2 \
  --points csa:32:64x64x8x1:5 csa:8:16x32x4x1:4 hca:8:default 2>&1 | grep -E "ERROR SUMMARY|Invalid|^csa|^hca" | head -20; echo "rc=$?"
SANITIZERS="initcheck-eager synccheck memcheck-csa" bash benchmarks/sanitizers.sh
} 2>&1 | tee "$OUT/pdl.log"
