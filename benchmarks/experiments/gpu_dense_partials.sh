#!/usr/bin/env bash
# GPU: the dense warp-specialized kernel writing cut requests' partials in q's dtype by TMA from q's shared memory
# (instead of fp32 from registers), A/B against the source before it (carry build/oldsrc: `git archive REV src | tar
# -x -C build/oldsrc`), `wavemla bench --dense` alternated in two rounds (bf16, h = 64 and 128 at b = 8, 32, 64 and
# 128 with 4K keys; h = 64 b = 32 at 16K, uniform and skewed, in the first round), then the dense GPU tests (both
# kernels, the combine, the hostile inputs) and a stress run.
#   BUDGET=560 bash benchmarks/experiments/gpu_dense_partials.sh SHA   (writes dense-partials.tar.gz and the log)
set -uo pipefail
BUDGET=${BUDGET:-560}
. "$(dirname "$0")/dense_ab.sh"
{
machine "$SHA"
for round in 1 2; do
  for v in new old; do
    ab_bench dp "$round-4k" $v 70 8 --kv-formats bf16 --heads 64 128 --batch 8 32 64 128 --seqlen 4096 \
      --lengths uniform
    [ "$round" = 1 ] && ab_bench dp "$round-16k" $v 45 8 --kv-formats bf16 --heads 64 --batch 32 --seqlen 16384 \
      --lengths uniform skewed
  done
done
step 150 python3 -m pytest -q -p no:cacheprovider $X -m gpu tests/kernels/test_dense_decode.py \
  tests/kernels/test_dense_decode_ws.py tests/kernels/test_combine.py tests/test_hostile_dense.py
step 40 python3 -m wavemla.tools.stress --mode dense --heads 64 --replays 1000
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense-partials.log"
grep -E "^== .*(pytest|stress)|passed|failed|mismatch|ceilings" "$OUT/dense-partials.log" | cut -c1-150 | tail -8
ab_tables dense-partials dp split_us combine_us
