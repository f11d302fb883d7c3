#!/usr/bin/env bash
# GPU: the planner with staged FP8 16x32 tiles (16x32x4x3): the sparse GPU tests, `wavemla stress` over 16-head
# plans (the staged tiles under CUDA graphs on two streams, bitwise against eager calls, CSA with the indexer and
# HCA), the 16-head b = 1..256 curves (median of 5), and the staged 64-row tile (16x64x4x2) against 16x32x4x3 at the
# same rows per program.
#   BUDGET=560 bash benchmarks/experiments/gpu_sparse_staged2.sh SHA   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-580}
. "$(dirname "$0")/../budget.sh"
pts=()
for bu in 32:4 128:10 256:20; do
  b=${bu%%:*}; u=${bu##*:}
  pts+=("csa-h16:$b:16x32x4x3:$u" "csa-h16:$b:16x64x4x2:$((u / 2))")
done
for bu in 32:6 128:18 256:36; do
  b=${bu%%:*}; u=${bu##*:}
  pts+=("hca-h16:$b:16x32x4x3:$u" "hca-h16:$b:16x64x4x2:$((u / 2))")
done
# the batches of 1-2 query tokens at 64 and 128 heads, where 16-head tiles run beside the warp-specialized kernel:
# the planner's plan (staged) against the register tile (or the kernel's 64x64) measured before
small=(csa:1:16x32x4x1:1 csa:2:16x32x4x1:1 hca:1:16x32x4x1:1 hca:2:16x32x4x1:2 csa-s2:1:16x32x4x1:1
       hca-s2:1:16x32x4x1:2 csa-h128:1:16x32x4x1:1 csa-h128:2:64x64x8x1:1)
for p in "${small[@]}"; do
  IFS=: read -r m b rest <<< "$p"
  pts+=("$m:$b:default" "$p")
done
{
machine "${1:-}"
step 100 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_sparse_decode.py tests/kernels/test_combine.py
step 100 python3 benchmarks/experiments/partition_sweep.py --reps 15 --json "$OUT/staged64.json" --points "${pts[@]}"
for m in csa hca; do
  step 120 python3 -m wavemla.cli bench --mode $m --s-q 1 --heads 16 --batch $(seq 1 256) --reps 5 \
    --json "$OUT/curve_${m}_h16_s1.json" --label "${1:-}"
done
for m in csa hca; do
  step 35 python3 -m wavemla.cli stress --mode $m --heads 16 --batch 8 67 133 256 --replays 2000
done
for c in csa:64:1 hca:64:1 csa:64:2 hca:64:2 csa:128:1; do
  IFS=: read -r m h s <<< "$c"
  step 25 python3 -m wavemla.cli bench --mode "$m" --s-q "$s" --heads "$h" --batch 1 2 --reps 15 \
    --json "$OUT/small_${m}_h${h}_s${s}.json" --label "${1:-}"
done
} 2>&1 | grep -v -E "Warning[:(]|warner\(|warn_once" > "$OUT/sparse_staged2.log"
(cd "$OUT" && tar czf small.tar.gz small_*.json && rm -f small_*.json)
grep -E "^== |passed|failed|mismatch|MISMATCH|ERROR|ceilings| b(1|8|32|64|128|133|256) " "$OUT/sparse_staged2.log" \
  | cut -c1-150
grep -E " b=" "$OUT/sparse_staged2.log" | cut -c1-130
