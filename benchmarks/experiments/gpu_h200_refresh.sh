#!/usr/bin/env bash
# The H200 figures last measured on other builds or cards, in one call: the spread plans against the uniform ones
# at the 22 spread points (until now timed on H100s only), then the DSV4-Flash layer benchmark as one GPU of 8
# expert-parallel ones (CSA and HCA, context 65,536) with each layer type's trace fit, from b = 1 and from b = 16.
# Output under $OUT (at most 8 files come back from a call): refresh.log, spread_ab.json, layer_ep8.json and
# layer_ep8_slopes.tar.gz holding layer_ep8_{csa,hca}_slope{,_from16}.{json,png}.
#   OUT=/some/dir bash benchmarks/experiments/gpu_h200_refresh.sh <git-sha>   (SKIP_SPREAD=1: the layer benchmark only;
#   LAYER_BATCH="16 24 32 ...": other batch sizes for it; LAYER_LIMIT: its time limit in seconds, default 260)
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
W="python3 -m wavemla.cli"
L=/tmp/layer_ep
{
  machine "${1:-unknown}"
  [ "${SKIP_SPREAD:-0}" = 1 ] || step 230 python3 benchmarks/experiments/spread_ab.py "$OUT/spread_ab.json" --rounds 3 --reps 10
  step "${LAYER_LIMIT:-260}" $W layer-bench --ep 8 --out $L --batch ${LAYER_BATCH:-1 8 16 32 48 64 96 128} --context 65536 --reps 10 --profile-steps 3
  cp $L/layer_bench.json "$OUT/layer_ep8.json" 2>/dev/null
  for m in csa hca; do
    step 30 $W trace $L/$m --step-kernel '^_sparse_mla_decode(_ws)?_kernel$' --rules $L/layer_rules.json \
      --json "$OUT/layer_ep8_${m}_slope.json" --png "$OUT/layer_ep8_${m}_slope.png"
    step 30 $W trace $L/$m --step-kernel '^_sparse_mla_decode(_ws)?_kernel$' --rules $L/layer_rules.json --fit-from 16 \
      --json "$OUT/layer_ep8_${m}_slope_from16.json" --png "$OUT/layer_ep8_${m}_slope_from16.png"
  done
  tar -czf "$OUT/layer_ep8_slopes.tar.gz" -C "$OUT" --remove-files $(cd "$OUT" && ls layer_ep8_*_slope*) 2>/dev/null
} 2>&1 | quiet > "$OUT/refresh.log"
cut -c1-200 "$OUT/refresh.log" | tail -90
