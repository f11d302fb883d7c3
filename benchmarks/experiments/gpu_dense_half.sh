#!/usr/bin/env bash
# GPU: the dense decode's cut-request partials stored as fp16 with a scale per row and 256-column half (half the
# bytes the split kernels write and the combine reads; the kernels of commit 5158675 only: slower, reverted;
# docs/dense-decode.md, "Tried and not kept"), A/B against the source before it (carry build/oldsrc:
# `git archive REV src | tar -x -C build/oldsrc`), `wavemla bench --dense` alternated in two rounds: the
# warp-specialized kernel (bf16 h = 64 b = 1, 8, 32, 64 at 4K; b = 32, 64 at 16K uniform and skewed; h = 128 b = 32
# 4K) and the Triton kernel (bf16 h = 16 and FP8 h = 64, b = 32 at 4K); then the dense GPU tests and a short stress.
#   BUDGET=540 bash benchmarks/experiments/gpu_dense_half.sh SHA   (writes dense-half.tar.gz and the log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-540}
. "$(dirname "$0")/dense_ab.sh"
{
machine "$SHA"
for round in 1 2; do
  for v in new old; do
    ab_bench dh "$round-4k" $v 70 10 --kv-formats bf16 --heads 64 128 --batch 1 8 32 64 --seqlen 4096 --lengths uniform
    ab_bench dh "$round-16k" $v 70 10 --kv-formats bf16 --heads 64 --batch 32 64 --seqlen 16384 --lengths uniform skewed
    ab_bench dh "$round-triton" $v 70 10 --kv-formats bf16 fp8 --heads 16 64 --batch 32 --seqlen 4096 --lengths uniform
  done
done
step 150 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_dense_decode.py \
  tests/kernels/test_dense_decode_ws.py tests/kernels/test_combine.py tests/test_plan_dense.py
step 60 python3 -m wavemla.tools.stress --mode dense --heads 64 --replays 1000
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense-half.log"
grep -E "^== .*(pytest|stress)|passed|failed|mismatch|ceilings" "$OUT/dense-half.log" | cut -c1-150 | tail -8
ab_tables dense-half dh combine_us
