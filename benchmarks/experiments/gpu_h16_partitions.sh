#!/usr/bin/env bash
# Two partition questions on one card (partition_sweep.py: CUDA graph, L2 flushed, median of 15, every output checked
# against the fp64 reference):
# 1. 16 heads, small batches: the planner's cut plans of two programs an SM (staged 16x32 tiles) against plans of one
#    program an SM (more tiles a program), where the curves step with an unchanged plan (CSA b = 20 -> 21).
# 2. The warp-specialized kernel's combine priced at the H200's rate on sm_90: the plans that moves (spreads of HCA
#    tokens, the 128-head b = 1 tile) against the plans they replace (the package's before the change).
# Output under $OUT: h16_partitions.{log,json}, ws_combine_ab.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_h16_partitions.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
SHA=${1:-}
T=16x32x4x3
H16=${H16:-"csa-h16:14:default csa-h16:14:$T:4 csa-h16:14:$T:5
  csa-h16:20:default csa-h16:20:$T:4 csa-h16:20:$T:5
  csa-h16:21:default csa-h16:21:$T:3 csa-h16:21:$T:4 csa-h16:21:$T:5
  csa-h16:24:default csa-h16:24:$T:4 csa-h16:24:$T:5
  csa-h16:26:default csa-h16:26:$T:4 csa-h16:26:$T:5
  hca-h16:11:default hca-h16:11:$T:2
  hca-h16:12:default hca-h16:12:$T:3 hca-h16:12:$T:4
  hca-h16:17:default hca-h16:17:$T:4 hca-h16:17:$T:6
  hca-h16:18:default hca-h16:18:$T:4 hca-h16:18:$T:6
  hca-h16:22:default hca-h16:22:$T:4 hca-h16:22:$T:6
  csa-s2-h16:10:default csa-s2-h16:10:$T:4 csa-s2-h16:10:$T:5
  csa-s2-h16:11:default csa-s2-h16:11:$T:4 csa-s2-h16:11:$T:5
  csa-s2-h16:13:default csa-s2-h16:13:$T:4 csa-s2-h16:13:$T:5
  csa-h16:66:default csa-h16:66:$T:10 csa-h16:67:default csa-h16:67:$T:11
  hca-h16:66:default hca-h16:66:$T:18 hca-h16:67:default hca-h16:67:$T:19"}
WS=${WS:-"hca:236:default hca:236:64x64x8x1:36 hca:241:default hca:241:64x64x8x1:36
  hca-s2:120:default hca-s2:120:64x64x8x1:36 hca-s2:186:default hca-s2:186:64x64x8x1:54
  hca-s2:252:default hca-s2:252:64x64x8x1:72 hca-h128:186:default hca-h128:186:64x64x8x1:54
  csa-h128:1:default csa-h128:1:16x32x4x1:1"}
{
  machine "$SHA"
  # shellcheck disable=SC2086
  step 280 python3 benchmarks/experiments/partition_sweep.py --points $H16 --reps 15 --json "$OUT/h16_partitions.json"
  # shellcheck disable=SC2086
  step 200 python3 benchmarks/experiments/partition_sweep.py --points $WS --reps 15 --json "$OUT/ws_combine_ab.json"
} 2>&1 | quiet > "$OUT/h16_partitions.log"
grep -E "b=|MISMATCH|Error|error" "$OUT/h16_partitions.log" | cut -c1-150
grep "^== " "$OUT/h16_partitions.log" | grep -v "^== exit 0" | cut -c1-120
