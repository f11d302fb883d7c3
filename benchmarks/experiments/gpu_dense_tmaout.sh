#!/usr/bin/env bash
# GPU: the dense warp-specialized kernel writing a finished request's output by TMA from q's shared memory (instead
# of 4-byte stores from registers), A/B against the source before it (carry build/oldsrc: `git archive REV src | tar
# -x -C build/oldsrc`), `wavemla bench --dense` alternated in two rounds (bf16, h = 64 and 128 at b = 32, 64, 121,
# 128 and 256 with 4K keys), then the dense warp-specialized GPU tests and a short stress.
#   BUDGET=330 bash benchmarks/experiments/gpu_dense_tmaout.sh SHA   (writes dense-tmaout.tar.gz and the log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-330}
. "$(dirname "$0")/dense_ab.sh"
{
machine "$SHA"
for round in 1 2; do
  for v in new old; do
    ab_bench dt "$round-4k" $v 70 8 --kv-formats bf16 --heads 64 128 --batch 32 64 121 128 256 --seqlen 4096 \
      --lengths uniform
  done
done
step 90 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_dense_decode.py \
  tests/kernels/test_dense_decode_ws.py -k "warp_specialized or part_per_request or gpu_v3 or graph or sm90"
step 40 python3 -m wavemla.tools.stress --mode dense --heads 64 --replays 1000
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense-tmaout.log"
grep -E "^== .*(pytest|stress)|passed|failed|mismatch|ceilings" "$OUT/dense-tmaout.log" | cut -c1-150 | tail -8
ab_tables dense-tmaout dt schedule_us
