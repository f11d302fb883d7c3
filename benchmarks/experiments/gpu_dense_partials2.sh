#!/usr/bin/env bash
# GPU: cut requests' partials in the compute dtype in the dense Triton split kernel too (fp16 for FP8 V3.2 rows, q's
# dtype for row caches), A/B against the source before both kernels' change (carry build/oldsrc: `git archive REV
# src | tar -x -C build/oldsrc`): `wavemla bench --dense` alternated in two rounds on the shapes the Triton kernel
# runs on an H200 (FP8 rows at h = 64 and 128, bf16 rows at h = 16; b = 8, 32, 64, 128; 4K keys). Then every dense
# test file on the GPU, a stress run, compute-sanitizer memcheck and racecheck over the dense kernels, and the dense
# kernel tests along the sm_120 code path.
#   BUDGET=560 bash benchmarks/experiments/gpu_dense_partials2.sh SHA   (writes dense-partials2.tar.gz and the log)
set -uo pipefail
BUDGET=${BUDGET:-560}
. "$(dirname "$0")/dense_ab.sh"
SAN="compute-sanitizer --error-exitcode 99"
{
machine "$SHA"
for round in 1 2; do
  for v in new old; do
    ab_bench dq "$round-fp8" $v 50 8 --kv-formats fp8 --heads 64 128 --batch 8 32 64 128 --seqlen 4096 \
      --lengths uniform
    ab_bench dq "$round-h16" $v 30 8 --kv-formats bf16 --heads 16 --batch 8 32 64 128 --seqlen 4096 \
      --lengths uniform
  done
done
step 200 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_dense_decode.py \
  tests/kernels/test_dense_decode_ws.py tests/kernels/test_combine.py tests/test_hostile_dense.py \
  tests/reference/test_dense_decode_ref.py
step 40 python3 -m wavemla.tools.stress --mode dense --heads 64 --replays 2000
PYTORCH_NO_CUDA_MEMORY_CACHING=1 step 90 $SAN --tool memcheck python3 benchmarks/sanitize_dense.py
step 90 $SAN --tool racecheck --racecheck-report hazard python3 benchmarks/sanitize_dense.py
step 60 $SAN --tool memcheck python3 -m wavemla.tools.stress --small --mode dense --replays 20
TRITON_OVERRIDE_ARCH=sm120 step 120 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_dense_decode.py
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense-partials2.log"
grep -E "^== |passed|failed|mismatch|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/dense-partials2.log" | cut -c1-150 | tail -24
ab_tables dense-partials2 dq split_us combine_us
