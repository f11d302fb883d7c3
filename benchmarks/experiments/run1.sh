#!/usr/bin/env bash
# Variant timings + one ncu source-level profile (H200).
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
E=benchmarks/experiments
M=$E/variants/sd_next.py  # bash benchmarks/experiments/materialize.sh; carry the folder
which ncu compute-sanitizer | head -2
timeout 240 python3 $E/vtime.py $M 128,32 src:64x64x8x1 n1p0:64x64x8x1:native=1 n1p1:64x64x8x1:native=1\;prefetch=1 \
  n1p2:64x64x8x1:native=1\;prefetch=2 n1p1s2:64x64x8x2:native=1\;prefetch=1 n1p0s2:64x64x8x2:native=1 \
  n1p1bn32:64x32x8x1:native=1\;prefetch=1 n1p2bn32:64x32x8x1:native=1\;prefetch=2 2>&1 | tee $OUT/vtime.log
timeout 200 ncu --section SpeedOfLight --section WarpStateStats --section SourceCounters --section InstructionStats \
  -k regex:_sparse_mla --launch-skip 2 --launch-count 1 -f -o /tmp/prof python3 $E/prof_one.py $M 128 64x64x8x1 native=1 prefetch=1 > $OUT/ncu.log 2>&1
ncu -i /tmp/prof.ncu-rep --page details > $OUT/ncu_details.txt 2>&1
ncu -i /tmp/prof.ncu-rep --page source --csv --print-source sass > $OUT/ncu_sass.csv 2>&1
tail -3 $OUT/ncu.log; wc -l $OUT/ncu_sass.csv; head -c 600 $OUT/ncu_sass.csv
grep -E "Duration|Warp Cycles Per Issued|Stall|Issue Slot|Executed Ipc" $OUT/ncu_details.txt | head -30
