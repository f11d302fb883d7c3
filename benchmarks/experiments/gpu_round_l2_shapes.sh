#!/usr/bin/env bash
# GPU: the bf16-row tolerance tests, the split kernel's L2 policies forced on where the launcher's rule leaves them
# off (s_q = 2, h = 128; launch_ab.py --kw l2_hints=1) and the h=64 s_q=1 b = 1..256 curves of the current kernel, within a budget.
#   BUDGET=420 bash benchmarks/experiments/gpu_round_l2_shapes.sh   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step 100 python3 -m pytest tests/kernels/test_numerics.py tests/test_hostile_inputs.py -q $X -p no:cacheprovider --tb=short
step 120 python3 benchmarks/experiments/launch_ab.py "$OUT/l2_shapes_ab.json" --kw l2_hints=1 --points csa:64:2:64 csa:96:2:64 \
  csa:128:2:64 hca:96:2:64 hca:128:2:64 csa:64:1:128 csa:96:1:128 csa:128:1:128 hca:96:1:128 csa:256:1:128 \
  csa:32:1:64 csa:96:1:16
step 80 $W bench --mode csa --s-q 1 --heads 64 --batch $(seq 1 256) --reps 5 --json "$OUT/curve_h64.json" \
  --label l2-hints > "$OUT/curve.log"
step 90 $W bench --mode hca --s-q 1 --heads 64 --batch $(seq 1 256) --reps 5 --json "$OUT/curve_h64_hca.json" \
  --label l2-hints > "$OUT/curve_hca.log"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/l2_shapes.log"
grep -E "^== |passed|failed|bits|^E |Falsifying" "$OUT/l2_shapes.log" | cut -c1-170
