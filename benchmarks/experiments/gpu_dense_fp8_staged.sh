#!/usr/bin/env bash
# GPU: the dense split kernel on FP8 V3.2 rows, register-prefetched tiles (num_stages 1, as shipped) against tiles
# staged by Triton's pipeliner (num_stages 2-3: raw bytes through cp.async) and the four 128-wide blocks apart
# (fp8_blocks: each block's scale applied to its dot's scores and to the weights meeting it; the decode is the e4m3
# conversion alone), with the bit-assembled or hardware e4m3 decode (e4m3_cvt). dense_variant_ab.py: same inputs,
# variants alternated in two rounds, CUDA graph, L2 flushed, outputs compared with the first variant's.
# Ran on commit 6dceeb0, whose launcher had the options fp8_blocks (the blocks apart, now what num_stages > 1 means
# for FP8 rows) and e4m3_cvt for the register tiles too; check that commit out to run it again.
#   BUDGET=400 bash benchmarks/experiments/gpu_dense_fp8_staged.sh SHA   (writes dense-fp8-staged-*.json and the log)
set -uo pipefail
BUDGET=${BUDGET:-400}
. "$(dirname "$0")/../budget.sh"
AB="python3 benchmarks/experiments/dense_variant_ab.py"
{
machine "${1:-}"
step 150 $AB "$OUT/dense-fp8-staged-h16.json" --reps 15 --points fp8:16:128:4096 fp8:16:32:4096 fp8:16:8:4096 \
  --variants e4m3_cvt=0 - stages=3 stages=2,fp8_blocks=1 stages=3,fp8_blocks=1 bn=32,stages=3,fp8_blocks=1 \
  bn=32,stages=3,warps=4,fp8_blocks=1 bn=32,stages=2,warps=4,fp8_blocks=1 e4m3_cvt=0,stages=3,fp8_blocks=1
step 150 $AB "$OUT/dense-fp8-staged-h64.json" --reps 15 --points fp8:64:128:4096 fp8:64:32:4096 fp8:128:32:4096 \
  --variants e4m3_cvt=0 - stages=2 bh=32,stages=2,fp8_blocks=1 bh=32,stages=3,fp8_blocks=1 \
  bh=16,stages=3,fp8_blocks=1 bh=16,bn=64,stages=3,fp8_blocks=1
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense-fp8-staged.log"
grep -E "^== |^copy|^dense|Error|error" "$OUT/dense-fp8-staged.log" | cut -c1-2000
