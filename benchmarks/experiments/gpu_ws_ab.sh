#!/usr/bin/env bash
# Another build of the warp-specialized sparse kernel against the package's (the generic form of gpu_ws_qk_ahead.sh):
# the kernel's GPU tests (warp-specialized, batch invariance, launch replays) on the package's build, then both builds
# in one run at the planner's plans (benchmarks/experiments/ws_bounds.py, variant file:OLD); STAGED=1 then also runs
# the staged-tile bounds (BOUNDS=staged gpu_ws_bounds.sh).
# Usage: OLD=benchmarks/experiments/variants/NAME.py bash benchmarks/experiments/gpu_ws_ab.sh SHA   (writes under $OUT)
#   OLD e.g. from `git show BASE:src/wavemla/kernels/sparse_decode_ws.py > benchmarks/experiments/variants/base.py`
#   (variants/ is git-ignored: carry it to the GPU machine).
set -uo pipefail
OUT=${OUT:-$PWD/ws-ab-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/ws-ab.log"
echo "commit ${1:-unlabelled}, against ${OLD:?set OLD}" | tee -a "$OUT/ws-ab.log"
timeout "${TEST_LIMIT:-200}" python3 -m pytest tests/kernels/test_sparse_decode_ws.py \
  tests/kernels/test_batch_invariance.py tests/kernels/test_launch.py -q -n 12 -p no:cacheprovider 2>&1 \
  | tail -3 | tee -a "$OUT/ws-ab.log"
timeout "${LIMIT:-300}" python3 benchmarks/experiments/ws_bounds.py --variants "file:$OLD" \
  --points ${POINTS:-csa:64 csa:128 csa:133 csa:256 hca:128 hca:256 csa-s2:96 csa-h128:96} \
  --reps "${REPS:-15}" --json "$OUT/ws-ab.json" 2>&1 | tee -a "$OUT/ws-ab.log"
if [ "${STAGED:-0}" = 1 ]; then
  OUT=$OUT BOUNDS=staged LIMIT=${STAGED_LIMIT:-200} bash benchmarks/experiments/gpu_ws_bounds.sh "${1:-unlabelled}" \
    > /dev/null 2>&1
  grep -E " us |ERROR" "$OUT/staged-bounds.log"
fi
