#!/usr/bin/env bash
# GPU: the merges loading their pieces four at a time (and both list lengths, and the sinks, loaded once): kernel
# tests, same bits and time against the serial merge (merge_ab.py), segment phase stamps (seg_phases.py), the
# batch-invariant cost and the stress harness. Run materialize.sh here first and carry benchmarks/experiments/variants.
#   bash benchmarks/experiments/gpu_round_merge_group.sh   (writes under $OUT; about 8 minutes)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
X=""; python3 -c "import xdist" 2>/dev/null && X="-n 8"
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
echo "## kernel tests"
timeout 200 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_determinism.py \
  tests/kernels/test_batch_invariance.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider 2>&1 | tail -3
echo "## hostile inputs"
timeout 100 python3 -m pytest tests/test_hostile_inputs.py -q -x -p no:cacheprovider -p no:xdist 2>&1 | grep -v -i warn \
  | grep -E "Error|error|assert|Falsifying|case|passed|failed|^E " | head -30
echo "## merge A/B (old: serial merge, 2fd72ff)"
timeout 170 python3 benchmarks/experiments/merge_ab.py "$OUT/merge_ab.json" --points \
  csa:128:2 csa:128:5 csa:256:2 csa:32:2 hca:32:2 hca:128:2 csa:133:0 csa:148:0 hca:133:0 csa:8:0 csa:1:0 \
  csa:128:0 csa:32:0 hca:32:0 2>&1 | grep -v -i warn
echo "## segment phases"
timeout 80 python3 benchmarks/experiments/seg_phases.py "$OUT/seg_phases.json" --points csa:128:2 csa:128:5 csa:133:0 \
  csa:128:0 2>&1 | grep -v -i warn
echo "## batch-invariant cost"
timeout 60 python3 benchmarks/bi_cost.py --batch 32 64 128 256 --reps 15 --json "$OUT/bi_cost.json" 2>&1 | grep -v -i warn | tail -12
echo "## stress"
timeout 60 python3 -m wavemla.cli stress 2>&1 | tail -3
timeout 40 python3 -m wavemla.cli stress --batch-invariant --replays 2000 2>&1 | tail -2
} 2>&1 | tee "$OUT/merge_group.log"
