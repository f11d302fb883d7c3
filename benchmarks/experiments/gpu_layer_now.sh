# GPU: the DSV4-Flash layer benchmark (CSA and HCA, b = 1..128, context 65,536) on the current stack, and the trace
# fit of each layer type (slopes per component, JSON and PNG). Writes under $OUT; about 3.5 minutes.
#   bash benchmarks/experiments/gpu_layer_now.sh
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
W="python3 -m wavemla.cli"
timeout 165 $W layer-bench --out /tmp/layer --batch 1 16 32 64 96 128 --context 65536 --reps 10 --profile-steps 3 \
  > "$OUT/layer.log" 2>&1; echo "layer-bench exit $?"
for m in csa hca; do
  timeout 25 $W trace /tmp/layer/$m --step-kernel '^_sparse_mla_decode(_ws)?_kernel$' --rules /tmp/layer/layer_rules.json \
    --json "$OUT/layer_${m}_slope.json" --png "$OUT/layer_${m}_slope.png" > /tmp/layer_${m}_trace.txt 2>&1
  echo "trace $m exit $?"
done
find /tmp/layer -maxdepth 1 -name "*.json" ! -name layer_rules.json -exec cp {} "$OUT/" \;
ls /tmp/layer; tail -30 "$OUT/layer.log"; cat /tmp/layer_csa_trace.txt | head -45; cat /tmp/layer_hca_trace.txt | head -45
