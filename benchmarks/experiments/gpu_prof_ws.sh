#!/usr/bin/env bash
# GPU: Nsight Compute on the warp-specialized sparse kernel at CSA h=64 b=128, default plan (one 10-tile token per
# program) against batch-invariant (the same token in two 5-tile pieces, merged in the program): per-SASS stall
# samples and instruction counts for each partition (ncu_sass_ws_summary.py maps them to source lines).
#   bash benchmarks/experiments/gpu_prof_ws.sh   (writes under $OUT; about 2 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
for m in ${MODES:-default bi}; do
  timeout 200 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SourceCounters \
    --section LaunchStats -k regex:_sparse_mla_decode_ws --launch-skip 2 --launch-count 1 -f -o /tmp/prof_$m \
    python3 benchmarks/experiments/prof_bi.py ${B:-128} $m > "$OUT/ncu_ws_$m.log" 2>&1
  ncu -i /tmp/prof_$m.ncu-rep --page details > "$OUT/ncu_ws_details_$m.txt" 2>&1
  ncu -i /tmp/prof_$m.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > "$OUT/ncu_ws_sass_$m.csv.gz"
  echo "== $m"; tail -2 "$OUT/ncu_ws_$m.log"
  grep -E "Duration|Warp Cycles Per Issued|Registers Per|Stall|Executed Ipc" "$OUT/ncu_ws_details_$m.txt" | head -12
done
