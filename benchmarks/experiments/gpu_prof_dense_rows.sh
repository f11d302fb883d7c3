#!/usr/bin/env bash
# GPU: Nsight Compute on the dense split kernel, bf16 rows, h = 64, b = 128, s_k = 4K: the keys-major 64x64x8x2 tile
# against the row-major 64x32x8x3 tile (dense_decode.rows64): stall reasons and per-SASS samples.
#   bash benchmarks/experiments/gpu_prof_dense_rows.sh   (writes under $OUT; about 2 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
for m in km r64; do
  if [ $m = km ]; then knobs="WAVEMLA_BLOCK_H=64 WAVEMLA_BLOCK_N=64 WAVEMLA_NUM_WARPS=8 WAVEMLA_NUM_STAGES=2"
  else knobs="WAVEMLA_BLOCK_H=64 WAVEMLA_BLOCK_N=32 WAVEMLA_NUM_WARPS=8 WAVEMLA_NUM_STAGES=3"; fi
  env $knobs timeout 200 ncu --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
    --section MemoryWorkloadAnalysis -k regex:_dense_mla_decode_kernel --launch-skip 2 --launch-count 1 -f -o /tmp/prof_$m \
    python3 benchmarks/experiments/prof_dense.py bf16:64:128:4096 0 > "$OUT/ncu_dense_$m.log" 2>&1
  ncu -i /tmp/prof_$m.ncu-rep --page details > "$OUT/ncu_dense_details_$m.txt" 2>&1
  ncu -i /tmp/prof_$m.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > "$OUT/ncu_dense_sass_$m.csv.gz"
  echo "== $m"; tail -2 "$OUT/ncu_dense_$m.log"
  grep -E "Duration|Warp Cycles Per Issued|Registers Per|Stall|Issue Slots Busy|Memory Throughput|Compute \(SM\)" "$OUT/ncu_dense_details_$m.txt" | head -14
done
