#!/usr/bin/env bash
# The spread partition timed where the model prices the uniform partition cheaper, past a perfect fit by up to 8
# leftover query tokens (spread_ab.py --force), against the uniform plan and the perfect fit before; then the
# DSV4-Flash layer benchmark as one GPU of 8 expert-parallel ones (CSA and HCA, context 65,536) with each layer type's
# trace fit from b = 16. Output under $OUT: spread_force.log, spread_force.json, layer_ep8.json,
# layer_ep8_slopes.tar.gz (layer_ep8_{csa,hca}_slope_from16.{json,png}).
#   OUT=/some/dir bash benchmarks/experiments/gpu_spread_force.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
SHA=${1:-}
POINTS=${POINTS:-"csa:137 csa:138 csa:140 hca:136 hca:137 hca:138 hca:140 csa-s2:69 csa-s2:70 hca-s2:68 hca-s2:70
  csa-h128:70 csa-h128:72 hca-h128:70 hca-h128:72 hca-h128:73"}
W="python3 -m wavemla.cli"
L=/tmp/layer_ep
{
  machine "$SHA"
  # shellcheck disable=SC2086
  step 200 python3 benchmarks/experiments/spread_ab.py "$OUT/spread_force.json" --points $POINTS --force \
    --rounds 3 --reps 10
  step 260 $W layer-bench --ep 8 --out $L --batch 1 8 16 32 48 64 96 128 --context 65536 --reps 10 --profile-steps 3
  cp $L/layer_bench.json "$OUT/layer_ep8.json" 2>/dev/null
  for m in csa hca; do
    step 30 $W trace $L/$m --step-kernel '^_sparse_mla_decode(_ws)?_kernel$' --rules $L/layer_rules.json \
      --fit-from 16 --json "$L/layer_ep8_${m}_slope_from16.json" --png "$L/layer_ep8_${m}_slope_from16.png"
  done
  tar czf "$OUT/layer_ep8_slopes.tar.gz" -C $L $(cd $L && ls layer_ep8_*_slope_from16.* 2>/dev/null)
} 2>&1 | quiet > "$OUT/spread_force.log"
grep -E "spread/uniform" "$OUT/spread_force.log"
sed -n '/^== .* trace /,/^== exit/p' "$OUT/spread_force.log" | cut -c1-170 | head -70
grep "^== " "$OUT/spread_force.log" | grep -v "^== exit 0"
