# GPU: batch-invariance tests (64x64 invariant plans now launch behind the q conversion kernel), the h=64 s_q=1
# anchor table (median of 30, against FlashMLA's published times), the batch-invariant cost, and the b = 1..256
# curves of HCA h=64 s_q=1 (re-measured after the 16x32 adjustment) and CSA/HCA h=64 s_q=2.
#   bash benchmarks/experiments/gpu_round_refit4.sh <git-sha>   (writes under $OUT; about 7 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
X=""; python3 -c "import xdist" 2>/dev/null && X="-n 8"
L=${1:-unlabelled}
timeout 80 python3 -m pytest tests/kernels/test_batch_invariance.py -m gpu -q $X -p no:cacheprovider 2>&1 \
  | grep -E "passed|failed|FAILED|Error" | tail -8 | tee "$OUT/tests.log"
timeout 90 python3 -m wavemla.cli bench --mode csa hca --s-q 1 --heads 64 --batch 1 8 32 48 64 80 96 128 148 256 \
  --reps 30 --json "$OUT/bench_h64.json" --label "$L" > "$OUT/bench_h64.log" 2>&1; echo "anchors exit $?"
timeout 50 python3 benchmarks/bi_cost.py --batch 1 32 64 128 256 --reps 15 --json "$OUT/bi_cost.json" \
  > "$OUT/bi_cost.log" 2>&1; echo "bi exit $?"
timeout 90 python3 -m wavemla.cli bench --mode hca --s-q 1 --heads 64 --batch $(seq 1 256) --reps 5 \
  --json "$OUT/curve_h64_hca.json" --label "$L" > /dev/null 2>&1; echo "hca h64 exit $?"
for m in csa hca; do
  timeout 120 python3 -m wavemla.cli bench --mode $m --s-q 2 --heads 64 --batch $(seq 1 256) --reps 5 \
    --json "$OUT/curve_h64_s2_$m.json" --label "$L" > /dev/null 2>&1; echo "$m s2 exit $?"
done
grep -E "^(csa|hca)" "$OUT/bench_h64.log" | cut -c1-150; tail -12 "$OUT/bi_cost.log"
