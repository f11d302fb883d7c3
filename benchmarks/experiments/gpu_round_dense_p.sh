#!/usr/bin/env bash
# GPU: the dense decode's P on bf16 rows, WAVEMLA_DENSE_P=split (two dots) against single (one bf16 dot), at
# DeepSeek-V3 shapes (b 32/128 x s_k 4K/16K x h 16/64/128, uniform lengths, the planner's pick; CUDA-graph replay,
# L2 flushed, median of 10, % of the copy bandwidth measured in the same process), alternating the two settings
# twice; then the dense GPU tests under each setting.
#   BUDGET=420 bash benchmarks/experiments/gpu_round_dense_p.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
B=(python3 -m wavemla.cli bench --dense --kv-formats bf16 --batch 32 128 --seqlen 4096 16384 --heads 16 64 128
  --lengths uniform --reps 10 --label "${1:-unknown}")
{
machine "${1:-}"
for round in 1 2; do
  for p in split single; do
    WAVEMLA_DENSE_P=$p step 70 "${B[@]}" --json "$OUT/dense_p_${p}_$round.json"
  done
done
for p in split single; do
  WAVEMLA_DENSE_P=$p step 90 python3 -m pytest -m gpu tests/kernels/test_dense_decode.py tests/kernels/test_numerics.py \
    tests/test_hostile_inputs.py -k dense -q $X -p no:cacheprovider --tb=line
done
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense_p.log"
grep -E "^== |passed|failed|^E |Error|^dense" "$OUT/dense_p.log" | cut -c1-170
