#!/usr/bin/env bash
# GPU: the sparse decode's small batches under every plan the planner can offer there (16x32 Triton tiles in 1-, 2-
# and 4-tile programs; the warp-specialized kernel's 64x64 tiles in 1-, 2- and 3-tile programs), for CSA and HCA at
# h=64, s_q=2 and h=128, b = 1..6 and 8 (partition_sweep.py: each plan checked against the fp64 reference, then
# CUDA-graph replay with L2 flushed, median of 15); then compute-sanitizer racecheck over the control kernel of
# ws_sanitizer_probe.py (warp_specialize with no shared memory of its own).
#   BUDGET=560 bash benchmarks/experiments/gpu_small_b.sh SHA      (writes small_b.json and small_b.log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-560}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
points=()
for shape in csa hca csa-s2 hca-s2 csa-h128 hca-h128; do
  for b in 1 2 3 4 5 6 8; do
    for spec in 16x32x4x1:1 16x32x4x1:2 16x32x4x1:4 64x64x8x1:1 64x64x8x1:2 64x64x8x1:3; do
      points+=("$shape:$b:$spec")
    done
  done
done
{
machine "$SHA"
step 120 compute-sanitizer --tool racecheck --racecheck-report hazard \
  python3 benchmarks/experiments/ws_sanitizer_probe.py control
step 420 python3 benchmarks/experiments/partition_sweep.py --reps 15 --points "${points[@]}" --json "$OUT/small_b.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/small_b.log"
grep -E "^== |control|RACECHECK|hazard|Race|ERROR|MISMATCH" "$OUT/small_b.log" | head -40
python3 - "$OUT/small_b.json" <<'PY'
import json, sys
rs = json.load(open(sys.argv[1]))["records"]
best = {}
for r in rs:
    k = (r["mode"], r["s_q"], r["h_q"], r["batch"])
    best.setdefault(k, []).append(r)
for k, v in sorted(best.items()):
    v.sort(key=lambda r: r["median_us"])
    print(k, "  ".join(f"{r['spec']} {r['median_us']:.1f}" for r in v[:4]))
PY
