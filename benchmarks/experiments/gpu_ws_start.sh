#!/usr/bin/env bash
# A warp-specialized sparse program's start by finer timer stamps (sparse_ws_start.py, with and without a clean L2),
# then other builds of the kernel against the package's at the planner's plans (ws_bounds.py, file:VARIANT).
# Usage: VARIANTS="benchmarks/experiments/variants/A.py ..." bash benchmarks/experiments/gpu_ws_start.sh SHA
#   (variants/ is git-ignored: carry it to the GPU machine; writes under $OUT)
set -uo pipefail
OUT=${OUT:-$PWD/ws-start-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src:$PWD/benchmarks/experiments${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
LOG=$OUT/ws-start.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$LOG"
echo "commit ${1:-unlabelled}" | tee -a "$LOG"
timeout "${START_LIMIT:-200}" python3 benchmarks/experiments/sparse_ws_start.py ${START_POINTS:-csa:8 csa:64 csa:128 hca:128} 2>&1 | tee -a "$LOG"
echo "clean L2:" | tee -a "$LOG"
timeout 120 python3 benchmarks/experiments/sparse_ws_start.py csa:8 csa:128 --clean 2>&1 | tee -a "$LOG"
if [ -n "${VARIANTS:-}" ]; then
  args=()
  for v in $VARIANTS; do args+=("file:$v"); done
  timeout "${LIMIT:-330}" python3 benchmarks/experiments/ws_bounds.py --variants "${args[@]}" \
    --points ${POINTS:-csa:1 csa:8 csa:32 csa:64 csa:128 csa:133 hca:32 csa:256} --reps "${REPS:-15}" \
    --json "$OUT/ws-variants.json" 2>&1 | tee -a "$LOG"
fi
