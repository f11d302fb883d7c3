#!/usr/bin/env bash
# GPU: the split kernel with its L2 policies on for every FP8 plan but 64x32 tiles. PART=A: kernel tests and the
# hostile-input property test side by side, the stress harness (default and batch-invariant), the s_q=2 h=64 b = 1..256
# curves. PART=B: the h=128 and h=16 b = 1..256 curves. Within a budget.
#   PART=A BUDGET=480 bash benchmarks/experiments/gpu_round_l2_wide.sh   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-480}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
curve() {  # curve LIMIT MODE HEADS S_Q NAME
  step "$1" $W bench --mode "$2" --heads "$3" --s-q "$4" --batch $(seq 1 256) --reps 5 --json "$OUT/$5.json" \
    --label l2-wide > "$OUT/$5.log"
}
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
if [ "${PART:-A}" = A ]; then
  step 240 python3 -m pytest tests/test_hostile_inputs.py -q -p no:cacheprovider -p no:xdist --tb=short \
    > "$OUT/hostile.log" 2>&1 &
  step 200 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_determinism.py \
    tests/kernels/test_batch_invariance.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider --tb=short
  wait
  cat "$OUT/hostile.log"
  step 60 $W stress
  step 25 $W stress --batch-invariant --replays 2000
  curve 100 csa 64 2 curve_h64_s2
  curve 110 hca 64 2 curve_h64_s2_hca
else
  curve 100 csa 128 1 curve_h128
  curve 110 hca 128 1 curve_h128_hca
  curve 80 csa 16 1 curve_h16
  curve 80 hca 16 1 curve_h16_hca
fi
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/l2_wide_${PART:-A}.log"
grep -E "^== |passed|failed|result|mismatch|^E |Falsifying" "$OUT/l2_wide_${PART:-A}.log" | cut -c1-170
for f in "$OUT"/curve*.log; do [ -f "$f" ] && grep -E "^(csa|hca) .* b(1|32|64|96|128|256) " "$f" | cut -c1-150; done
