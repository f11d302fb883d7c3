#!/usr/bin/env bash
# GPU: Nsight Compute over the lightning indexer's score kernel (FP8 page-split rows, FP8 q, top-512), one call per
# shape after a first call that compiles: throughput against the memory ceiling, warp stall reasons, occupancy.
# Usage: bash benchmarks/experiments/gpu_idx_ncu.sh [SPEC ...]   (idx_prof.py specs; default 32:32768:fp8qp)
# Writes $OUT/idx-ncu-<spec>.txt and prints the headline rows.
set -uo pipefail
OUT=${OUT:-$PWD/idx-ncu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
SPECS=("$@")
[ "${#SPECS[@]}" -eq 0 ] && SPECS=(32:32768:fp8qp)
for spec in "${SPECS[@]}"; do
  f="$OUT/idx-ncu-${spec//:/-}.txt"
  timeout 180 ncu --clock-control none -k regex:_indexer_score --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
    --section LaunchStats --section SchedulerStats \
    python3 benchmarks/experiments/idx_prof.py --once "$spec" > "$f" 2>&1
  echo "== $spec (ncu exit $?)"
  grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Issued Warp Per Scheduler|No Eligible|Block Limit" "$f" \
    | sed 's/  */ /g' | head -30
done
