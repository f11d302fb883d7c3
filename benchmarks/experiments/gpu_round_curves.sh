#!/usr/bin/env bash
# GPU: b = 1..256 curves of the sparse decode (median of 5 each), within a budget.
#   BUDGET=500 bash benchmarks/experiments/gpu_round_curves.sh SHA [MODE:HEADS:S_Q ...]   (writes under $OUT)
# Default curves: csa:64:2 csa:128:1 hca:64:2 hca:128:1.
set -uo pipefail
BUDGET=${BUDGET:-500}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
shift || true
[ $# -gt 0 ] || set -- csa:64:2 csa:128:1 hca:64:2 hca:128:1
{
machine "$SHA"
for c in "$@"; do
  IFS=: read -r m h s <<< "$c"
  step 150 python3 -m wavemla.cli bench --mode "$m" --s-q "$s" --heads "$h" --batch $(seq 1 256) --reps 5 \
    --json "$OUT/curve_${m}_h${h}_s${s}.json" --label "$SHA"
done
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/curves.log"
grep -E "^== |ceilings| b(1|32|64|96|128|148|256) " "$OUT/curves.log" | cut -c1-150
