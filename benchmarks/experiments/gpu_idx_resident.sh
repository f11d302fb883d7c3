#!/usr/bin/env bash
# GPU: the indexer's per-token select with every key of a token held in registers for its bracket steps, and the
# select launched behind the score kernel (programmatic dependent launch). The indexer's GPU tests; the score
# kernel, both selects alone and the whole call with and without the dependent launch (idx_score_sweep.py); both
# select paths over the shape grid (idx_select.py); the CSA stress harness (indexer + sparse decode in graphs on two
# streams) for 10,000 replays; memcheck and racecheck of its small variant. One call, about 6 minutes:
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_resident.sh
# The kernel it measured is the one at commit 461e4c9 (reverted after: slower); at later commits it runs the shipped one.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader 2>&1 | head -1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
timeout 120 python3 -m pytest tests/kernels/test_indexer.py -m gpu -q -p no:cacheprovider 2>&1 | tail -4 \
  | tee "$OUT/idx-resident-tests.log"
echo "tests rc=${PIPESTATUS[0]}"
timeout 150 python3 benchmarks/experiments/idx_score_sweep.py "$OUT/idx-resident.json" 2>&1 | grep -v Warn \
  | tee "$OUT/idx-resident.log"
echo "sweep rc=${PIPESTATUS[0]}"
timeout 100 python3 benchmarks/experiments/idx_select.py "$OUT/idx-select.json" 2>&1 | grep -v Warn \
  | tee "$OUT/idx-select.log"
echo "select rc=${PIPESTATUS[0]}"
timeout 120 python3 -m wavemla.tools.stress --mode csa --replays 10000 2>&1 | tail -6 | tee "$OUT/idx-stress.log"
echo "stress rc=${PIPESTATUS[0]}"
SANITIZERS="memcheck-csa racecheck-csa" RACECHECK_LIMIT=100 bash benchmarks/sanitizers.sh
