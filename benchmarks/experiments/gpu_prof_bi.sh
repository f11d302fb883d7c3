# GPU: Nsight Compute on the split kernel at CSA b=128, default plan (one 10-tile segment per program) against
# batch-invariant (two 5-tile pieces per program, merged in the program): stall reasons and per-SASS stall samples.
#   bash benchmarks/experiments/gpu_prof_bi.sh   (writes under $OUT; about 2 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
for m in default bi; do
  timeout 150 ncu --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
    -k regex:_sparse_mla_decode --launch-skip 2 --launch-count 1 -f -o /tmp/prof_$m \
    python3 benchmarks/experiments/prof_bi.py 128 $m > "$OUT/ncu_$m.log" 2>&1
  ncu -i /tmp/prof_$m.ncu-rep --page details > "$OUT/ncu_details_$m.txt" 2>&1
  ncu -i /tmp/prof_$m.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > "$OUT/ncu_sass_$m.csv.gz"
  echo "== $m"; tail -2 "$OUT/ncu_$m.log"
  grep -E "Duration|Warp Cycles Per Issued|Registers Per|Local|Stall" "$OUT/ncu_details_$m.txt" | head -12
done
