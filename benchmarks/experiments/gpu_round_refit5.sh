# GPU: the b = 1..256 curves of CSA and HCA at h=128 s_q=1 with the re-fitted planner.
#   bash benchmarks/experiments/gpu_round_refit5.sh <git-sha>   (writes under $OUT; about 4 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
for m in csa hca; do
  timeout 140 python3 -m wavemla.cli bench --mode $m --s-q 1 --heads 128 --batch $(seq 1 256) --reps 5 \
    --json "$OUT/curve_h128_$m.json" --label "${1:-unlabelled}" > "$OUT/curve_h128_$m.log" 2>&1; echo "$m h128 exit $?"
  grep -E " b(1|32|64|96|128|256) " "$OUT/curve_h128_$m.log" | cut -c1-150
done
