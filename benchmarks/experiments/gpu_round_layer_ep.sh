#!/usr/bin/env bash
# GPU: the DSV4-Flash layer benchmark as one GPU of 8 expert-parallel ones (--ep 8: 32 routed experts and the shared
# one here, serving the pairs routed to them from 8x the batch), CSA and HCA, context 65,536, and the trace fit of
# each layer type (slopes and R² per component, JSON and PNG).
#   BUDGET=330 bash benchmarks/experiments/gpu_round_layer_ep.sh <git-sha>   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-330}
. "$(dirname "$0")/../budget.sh"
W="python3 -m wavemla.cli"
{
machine "${1:-}"
step 260 $W layer-bench --ep 8 --out /tmp/layer_ep --batch 1 8 16 32 48 64 96 128 --context 65536 --reps 10 \
  --profile-steps 3
for m in csa hca; do
  step 30 $W trace /tmp/layer_ep/$m --step-kernel '^_sparse_mla_decode(_ws)?_kernel$' --rules /tmp/layer_ep/layer_rules.json \
    --json "$OUT/layer_ep8_${m}_slope.json" --png "$OUT/layer_ep8_${m}_slope.png"
done
cp /tmp/layer_ep/layer_bench.json "$OUT/layer_ep8.json" 2>/dev/null
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/layer_ep8.log"
cat "$OUT/layer_ep8.log" | cut -c1-200 | tail -80
