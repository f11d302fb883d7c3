#!/usr/bin/env bash
# The dense decode's two 16-head row tiles for bf16 rows, 16x16x4x3 (the H100 preset's pick) and 16x32x4x3 (the
# H200 preset's), forced at b = 32, 64, 128 with 4K and 16K keys (the requests' pages from one pool built for the
# largest batch, as in the grid), then b = 32, 16K alone (its own pool), each `wavemla bench --dense`, median of 15.
# Output under $OUT: h16_tiles.log, h16_tiles_grid.json, h16_tiles_alone.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_dense_h16_tiles.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-240}
source benchmarks/budget.sh
W="python3 -m wavemla.cli bench --dense --heads 16 --kv-formats bf16 --configs 16x16x4x3 16x32x4x3 --reps 15"
{
  machine "${1:-unknown}"
  step 150 $W --batch 32 64 128 --seqlen 4096 16384 --json "$OUT/h16_tiles_grid.json"
  step 60 $W --batch 32 --seqlen 16384 --json "$OUT/h16_tiles_alone.json"
} 2>&1 | quiet > "$OUT/h16_tiles.log"
grep -E "^== |^dense |ceiling" "$OUT/h16_tiles.log" | cut -c1-230
