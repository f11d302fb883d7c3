#!/usr/bin/env bash
# Per-tensor FP8 rows in the dense decode (an engine's fp8 KV cache: 576 e4m3 codes a token, descale_k): the dense
# kernel, reference, engine-call and bench tests on the GPU, `wavemla demo --dense --fp8-tensor`, `wavemla stress
# --mode dense --fp8-tensor` (2,000 replays on two streams), compute-sanitizer memcheck and racecheck over the
# dense kernels (sanitize_dense.py, per-tensor cases included), `wavemla bench --dense` of bf16 rows, FP8 V3.2 and
# per-tensor FP8 at b = 32 and 128, 4K and 16K keys, 16, 64 and 128 heads (uniform lengths, median of 10, copy and
# GEMM ceilings in the same run), then the hostile dense inputs in what is left of the budget. Output under $OUT: fp8_tensor.log,
# bench_fp8_tensor.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_fp8_tensor.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-570}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  step 200 python3 -m pytest tests/kernels/test_dense_decode.py tests/test_flash_mla.py \
    tests/reference/test_dense_decode_ref.py tests/tools/test_bench.py -q -p no:cacheprovider $X
  step 40 python3 -m wavemla demo --dense --fp8-tensor
  step 70 python3 -m wavemla.cli stress --mode dense --fp8-tensor --heads 128 --seqlen 4096 --replays 2000
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 step 90 compute-sanitizer --error-exitcode 99 --tool memcheck \
    python3 benchmarks/sanitize_dense.py
  step 150 compute-sanitizer --error-exitcode 99 --tool racecheck --racecheck-report hazard \
    python3 benchmarks/sanitize_dense.py
  step 220 python3 -m wavemla.cli bench --dense --batch 32 128 --seqlen 4096 16384 --heads 16 64 128 \
    --lengths uniform --kv-formats bf16 fp8 fp8-tensor --reps 10 --json "$OUT/bench_fp8_tensor.json"
  step $((END - SECONDS - 5)) python3 -m pytest tests/test_hostile_dense.py -q -p no:cacheprovider $X
} 2>&1 | quiet > "$OUT/fp8_tensor.log"
grep -E "^== |passed|failed|ERROR SUMMARY|result:|^dense |ceiling|µs|us per|TFLOP" "$OUT/fp8_tensor.log" | cut -c1-220 | tail -60
