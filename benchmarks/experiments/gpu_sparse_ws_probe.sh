#!/usr/bin/env bash
# GPU: the warp-specialized sparse decode with one side removed at a time (sparse_ws_probe.py), and Nsight Compute's
# per-instruction stall samples of the whole kernel at CSA h=64 b=128.
#   BUDGET=300 bash benchmarks/experiments/gpu_sparse_ws_probe.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-300}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
for p in ${PROBES:-0 1 2 4}; do step 60 python3 benchmarks/experiments/sparse_ws_probe.py $p 32 128 256; done
step 150 ncu --section SpeedOfLight --section WarpStateStats --section SourceCounters -k regex:ws_kernel -c 1 \
  -f -o /tmp/prof_ws python3 benchmarks/experiments/sparse_ws_probe.py 0 128 --once
ncu -i /tmp/prof_ws.ncu-rep --page details > "$OUT/ncu_ws_details.txt" 2>&1
ncu -i /tmp/prof_ws.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > "$OUT/ncu_ws_sass.csv.gz"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/sparse_ws_probe.log"
grep -E "^== |^probe|Error|error" "$OUT/sparse_ws_probe.log" | cut -c1-200
