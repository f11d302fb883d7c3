#!/usr/bin/env bash
# GPU: staged FP8 V3.2 tiles (num_stages > 1: raw bytes through cp.async, the four 128-wide blocks of a row apart)
# over tile shapes, against the planner's register-prefetched pick, at 16 query rows (h = 16) and 32 (h = 32) and
# at h = 64 with small batches (where the planner takes 16- and 32-row tiles); then the dense GPU tests.
# dense_variant_ab.py: same inputs, variants alternated in two rounds, CUDA graph, L2 flushed.
#   BUDGET=480 bash benchmarks/experiments/gpu_dense_fp8_staged2.sh SHA   (writes dense-fp8-staged2-*.json, the log)
set -uo pipefail
BUDGET=${BUDGET:-480}
. "$(dirname "$0")/../budget.sh"
AB="python3 benchmarks/experiments/dense_variant_ab.py"
{
machine "${1:-}"
step 170 $AB "$OUT/dense-fp8-staged2-h16.json" --reps 15 --points fp8:16:128:4096 fp8:16:32:4096 fp8:16:8:4096 \
  fp8:16:1:4096 fp8:16:32:16384 --variants - bn=32,stages=3,warps=4 bn=16,stages=3,warps=4 bn=64,stages=3,warps=8 \
  bn=32,stages=4,warps=4 bn=32,stages=3,warps=8 bn=64,stages=2,warps=8
step 130 $AB "$OUT/dense-fp8-staged2-h32.json" --reps 15 --points fp8:32:32:4096 fp8:32:128:4096 fp8:64:1:4096 \
  fp8:64:8:4096 --variants - bh=32,bn=32,stages=3,warps=8 bh=16,bn=32,stages=3,warps=4 bh=16,bn=16,stages=3,warps=4
step 150 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_dense_decode.py tests/test_hostile_dense.py
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense-fp8-staged2.log"
grep -E "^== |^copy|^dense|passed|failed|Error" "$OUT/dense-fp8-staged2.log" | cut -c1-2000
