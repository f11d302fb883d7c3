#!/usr/bin/env bash
# GPU: the dense scheduler gathering each part's request prefix and units in registers (and the next part's start)
# instead of reading back the rows it stored (two round trips to L2 and two block barriers fewer, for batches of up to
# 1024 requests; the kernel of commit d4d2a29 only: no faster, reverted; docs/dense-decode.md, "Tried and not kept"),
# A/B against the source before it (carry build/oldsrc: `git archive REV src | tar -x -C
# build/oldsrc`), `wavemla bench --dense` alternated in two rounds (bf16, h = 64 and 128 at b = 1, 8, 32, 64 and 128
# with 4K keys; h = 64 b = 32 with 16K, uniform and skewed; bf16 h = 16 and FP8 h = 64 at b = 32 4K: the Triton
# kernel), with the scheduler also timed alone; then the dense GPU tests and a short stress.
#   BUDGET=540 bash benchmarks/experiments/gpu_dense_sched.sh SHA   (writes dense-sched.tar.gz and the log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-540}
. "$(dirname "$0")/dense_ab.sh"
{
machine "$SHA"
for round in 1 2; do
  for v in new old; do
    ab_bench ds "$round-4k" $v 70 10 --kv-formats bf16 --heads 64 128 --batch 1 8 32 64 128 --seqlen 4096 --lengths uniform
    ab_bench ds "$round-16k" $v 70 10 --kv-formats bf16 --heads 64 --batch 32 --seqlen 16384 --lengths uniform skewed
    ab_bench ds "$round-triton" $v 70 10 --kv-formats bf16 fp8 --heads 16 64 --batch 32 --seqlen 4096 --lengths uniform
  done
done
step 150 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_dense_decode.py \
  tests/kernels/test_dense_decode_ws.py tests/kernels/test_combine.py tests/test_plan_dense.py
step 60 python3 -m wavemla.tools.stress --mode dense --heads 64 --replays 1000
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense-sched.log"
grep -E "^== .*(pytest|stress)|passed|failed|mismatch|ceilings" "$OUT/dense-sched.log" | cut -c1-150 | tail -8
ab_tables dense-sched ds schedule_us
