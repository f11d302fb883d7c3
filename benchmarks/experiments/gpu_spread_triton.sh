#!/usr/bin/env bash
# The spread partition (whole tokens first, the leftover spread) in the Triton split kernel: spread_ab.py at 16 heads
# (s_q = 2, where b·s_q passes the 264 slots of two programs an SM), then with the warp-specialized kernel off
# (WAVEMLA_SPARSE_WS=off: the Triton kernel's 64-row tiles at 64 and 128 heads, the plans GPUs without the sm_90
# kernel run), each against the uniform plan and the perfect fit before; then the 16-head s_q = 2 curves.
# Output under $OUT: spread_triton.log, spread_h16.json, spread_ws_off.json, curve_*_h16_s2.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_spread_triton.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
SHA=${1:-}
H16=${H16:-"csa-s2-h16:133 csa-s2-h16:134 csa-s2-h16:140 csa-s2-h16:152 csa-s2-h16:170 csa-s2-h16:196
  hca-s2-h16:133 hca-s2-h16:150 hca-s2-h16:180"}
OFF=${OFF:-"csa-h128:74 csa-h128:90 csa-h128:150 csa-s2:80 csa:150 hca:160 hca:200 hca-s2:80 hca-s2:100"}
{
  machine "$SHA"
  # shellcheck disable=SC2086
  step 170 python3 benchmarks/experiments/spread_ab.py "$OUT/spread_h16.json" --points $H16 --rounds 3 --reps 10
  # shellcheck disable=SC2086
  step 190 env WAVEMLA_SPARSE_WS=off python3 benchmarks/experiments/spread_ab.py "$OUT/spread_ws_off.json" \
    --points $OFF --rounds 3 --reps 10
  curve_part 80 csa 16 2 1 256
  curve_part 80 hca 16 2 1 256
} 2>&1 | quiet > "$OUT/spread_triton.log"
grep -E "spread/uniform|MISMATCH|Error|error" "$OUT/spread_triton.log" | cut -c1-200
python3 benchmarks/experiments/curve_steps.py "$OUT"/curve_*.json
grep "^== " "$OUT/spread_triton.log" | grep -v "^== exit 0" | cut -c1-120
