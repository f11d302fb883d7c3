#!/usr/bin/env bash
# GPU: Nsight Compute's per-SASS stall samples of the warp-specialized sparse kernel at CSA h=64 b=256 (two whole
# tokens a program: one switch between token segments in every program), with the SASS of the cubin that ran, for
# ncu_ws_lines.py (which lines the switch's time goes to, and why).
#   bash benchmarks/experiments/gpu_prof_switch.sh   (writes under $OUT)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
rm -rf ~/.triton/cache
timeout 200 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SourceCounters \
  -k regex:_sparse_mla_decode_ws --launch-skip 2 --launch-count 1 -f -o /tmp/prof_sw \
  python3 benchmarks/experiments/prof_bi.py ${B:-256} default > "$OUT/ncu_switch.log" 2>&1
tail -2 "$OUT/ncu_switch.log"
ncu -i /tmp/prof_sw.ncu-rep --page details > "$OUT/ncu_switch_details.txt" 2>&1
ncu -i /tmp/prof_sw.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > "$OUT/ncu_switch_sass.csv.gz"
ND=$(python3 -c "import triton, pathlib; print(pathlib.Path(triton.__file__).parent / 'backends/nvidia/bin/nvdisasm')")
f=$(ls -t ~/.triton/cache/*/_sparse_mla_decode_ws_kernel.cubin | head -1)
"$ND" -c -g "$f" > "$OUT/switch_kernel.sass"
grep -E "Duration|Warp Cycles Per Issued|Stall|Executed Ipc" "$OUT/ncu_switch_details.txt" | head -12
