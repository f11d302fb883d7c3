#!/usr/bin/env bash
# GPU: the dense decode's whole benchmark grid as the issue of record specifies it (b = 1, 8, 32, 64, 128; s_k 1K, 4K,
# 16K, 64K; h = 16, 64, 128; uniform and skewed lengths; bf16 rows and FP8 V3.2), CUDA graph, L2 flushed, median of
# 10, then the rows at b >= 32 and s_k >= 4K against the 85% aim.
#   BUDGET=420 bash benchmarks/experiments/gpu_dense_grid.sh SHA   (writes dense-grid.json and dense-grid.log)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
{
machine "${1:-}"
step 400 python3 -m wavemla.cli bench --dense --batch 1 8 32 64 128 --seqlen 1024 4096 16384 65536 \
  --heads 16 64 128 --lengths uniform skewed --kv-formats bf16 fp8 --reps 10 --json "$OUT/dense-grid.json" \
  --label "${1:-unknown}"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense-grid.log"
grep -E "^== |ceilings" "$OUT/dense-grid.log" | cut -c1-150
python3 - "$OUT/dense-grid.json" <<'PY' | tee -a "$OUT/dense-grid.log"
import json, sys
d = json.load(open(sys.argv[1]))
rows = [r for r in d["records"] if r["batch"] >= 32 and r["s_k"] >= 4096]
print("fmt   lengths  h    b    s_k      µs  %copy  reused %copy")
for r in sorted(rows, key=lambda r: (r["kv_format"], r["lengths"], r["h_q"], r["batch"], r["s_k"])):
    print(f"{r['kv_format']:5s} {r['lengths']:8s} {r['h_q']:3d} {r['batch']:4d} {r['s_k']:6d} {r['median_us']:8.1f} "
          f"{r['pct_copy']:5.1f}  {r.get('pct_copy_reused', float('nan')):5.1f}")
PY
