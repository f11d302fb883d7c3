# GPU: kernel tests, then the q conversion kernel with the split kernel launched behind it for programmatic dependent
# launch (":torch-q" is the torch conversion, ":no-prefetch" the dependent launch without the first tile's L2
# prefetch) at CSA b=32, and where batch-invariant time goes (pieces per token, q path) at CSA b=128 and HCA.
#   bash benchmarks/experiments/gpu_round_qwait.sh   (writes under $OUT; about 6 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
X=""; python3 -c "import xdist" 2>/dev/null && X="-n 8"
{
timeout 220 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_determinism.py tests/kernels/test_batch_invariance.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider 2>&1 | tail -3
echo "## partition_sweep (reps 30)"
timeout 200 python3 benchmarks/experiments/partition_sweep.py --reps 30 --json "$OUT/qwait.json" --points \
  csa:32:default csa:32:default:torch-q csa:32:default:no-prefetch csa:32:default csa:32:default:torch-q csa:32:default:no-prefetch \
  csa:128:64x64x8x1:10 csa:128:default:bi csa:128:default:bi:launcher-q csa:128:default:bi:splits=5 csa:128:default:bi:splits=10 \
  hca:32:default hca:32:default:bi hca:32:default:bi:splits=3 hca:32:default:bi:splits=6 \
  hca:128:default hca:128:default:bi hca:128:default:bi:splits=3 hca:128:default:bi:splits=6 2>&1 | grep -v -i warn
echo "## stress"
timeout 60 python3 -m wavemla.cli stress 2>&1 | tail -4
} 2>&1 | tee "$OUT/qwait.log"
