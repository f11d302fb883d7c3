# GPU: kernel tests, then batch-invariant pieces cut inside one run of the tile loop (the default) against one
# segment per piece (":no-flush"), per pieces-per-token, at CSA/HCA b = 32..256; stress; memcheck of the merged pieces.
#   bash benchmarks/experiments/gpu_round_flush.sh   (writes under $OUT; about 7 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
X=""; python3 -c "import xdist" 2>/dev/null && X="-n 8"
{
timeout 220 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_determinism.py tests/kernels/test_batch_invariance.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider 2>&1 | tail -3
echo "## partition_sweep (reps 30)"
P=""
for b in 32 64 128 256; do
  P="$P csa:$b:default csa:$b:default:bi csa:$b:default:bi:no-flush csa:$b:default:bi:splits=5"
  P="$P hca:$b:default hca:$b:default:bi hca:$b:default:bi:no-flush hca:$b:default:bi:splits=3 hca:$b:default:bi:splits=6"
done
timeout 260 python3 benchmarks/experiments/partition_sweep.py --reps 30 --json "$OUT/flush.json" --points $P 2>&1 | grep -v -i warn
echo "## stress"
timeout 60 python3 -m wavemla.cli stress 2>&1 | grep -E "wavemla stress|result"
echo "## memcheck: batch-invariant pieces"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest tests/kernels/test_batch_invariance.py -k "merged or packed" -q -p no:cacheprovider 2>&1 | grep -E "ERROR SUMMARY|passed|failed" | tail -3
} 2>&1 | tee "$OUT/flush.log"
