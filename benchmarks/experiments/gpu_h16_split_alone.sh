#!/usr/bin/env bash
# The step of the 16-head cut plans past ~200 programs (two programs an SM, 2-4 tiles each): split_alone.py over
# CSA b = 16..22 at 2 tiles a program, the one-program-an-SM plan at b = 21, the 1-stage tile at b = 20 and 21, HCA
# b = 18 (3 and 6 tiles) and CSA b = 66 (5 tiles, 264 programs). Output: $OUT/split_alone.{log,json}.
#   OUT=/some/dir bash benchmarks/experiments/gpu_h16_split_alone.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-300}
source benchmarks/budget.sh
SHA=${1:-}
T=16x32x4x3
P=${P:-"csa-h16:16:$T:2 csa-h16:18:$T:2 csa-h16:19:$T:2 csa-h16:20:$T:2 csa-h16:21:$T:2 csa-h16:22:$T:2
  csa-h16:21:$T:4 csa-h16:20:16x32x4x1:2 csa-h16:21:16x32x4x1:2 hca-h16:18:$T:3 hca-h16:18:$T:6
  csa-h16:66:$T:5"}
{
  machine "$SHA"
  # shellcheck disable=SC2086
  step 280 python3 benchmarks/experiments/split_alone.py --points $P --json "$OUT/split_alone.json"
} 2>&1 | quiet > "$OUT/split_alone.log"
grep -E "upp=|MISMATCH|Error|error" "$OUT/split_alone.log" | cut -c1-160
grep "^== " "$OUT/split_alone.log" | grep -v "^== exit 0" | cut -c1-120
