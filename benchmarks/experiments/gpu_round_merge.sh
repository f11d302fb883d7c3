# GPU: kernel tests, then the in-kernel merge of cut tokens all at once (":mdc=0") against 128 or 64 columns at a
# time, on the plans that merge in the split kernel (CSA/HCA default plans with cut tokens, batch-invariant plans).
#   bash benchmarks/experiments/gpu_round_merge.sh   (writes under $OUT; about 5 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
X=""; python3 -c "import xdist" 2>/dev/null && X="-n 8"
{
timeout 220 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_determinism.py tests/kernels/test_batch_invariance.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider 2>&1 | grep -E "passed|failed|FAILED|Error" | tail -8
echo "## partition_sweep (reps 30)"
P="csa:32:default csa:32:default:no-prefetch"
for pt in csa:48:default csa:64:default csa:148:default hca:32:default hca:64:default hca:96:default csa:128:default:bi hca:128:default:bi csa:256:default:bi; do
  P="$P $pt:mdc=0 $pt:mdc=128 $pt:mdc=64"
done
timeout 200 python3 benchmarks/experiments/partition_sweep.py --reps 30 --json "$OUT/merge.json" --points $P 2>&1 | grep -v -i warn
} 2>&1 | tee "$OUT/merge.log"
