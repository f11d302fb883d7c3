# GPU: the sparse-decode kernel tests and the graphs-x-streams stress (64x64 plans now launch behind the q
# conversion kernel), then the b = 1..256 curves of CSA and HCA at h=64 s_q=1 with the re-fitted planner, and
# 16x32 plans with q through the conversion kernel against the scratch rows they use.
#   bash benchmarks/experiments/gpu_round_refit3.sh <git-sha>   (writes under $OUT; about 6 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
X=""; python3 -c "import xdist" 2>/dev/null && X="-n 8"
timeout 150 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_determinism.py -m gpu -q $X \
  -p no:cacheprovider 2>&1 | grep -E "passed|failed|FAILED|Error" | tail -8 | tee "$OUT/tests.log"
timeout 60 python3 -m wavemla.cli stress > "$OUT/stress.log" 2>&1; echo "stress exit $?"; tail -3 "$OUT/stress.log"
for m in csa hca; do
  timeout 100 python3 -m wavemla.cli bench --mode $m --s-q 1 --heads 64 --batch $(seq 1 256) --reps 5 \
    --json "$OUT/curve_h64_$m.json" --label "${1:-unlabelled}" > "$OUT/curve_h64_$m.log" 2>&1; echo "$m h64 exit $?"
done
C=16x32x4x1
P=""; for x in csa:8:5 csa:12:4 csa:16:5 hca:8:5 hca:16:9; do
  m=${x%%:*}; r=${x#*:}; b=${r%%:*}; u=${r##*:}; P="$P $m:$b:$C:$u $m:$b:$C:$u:launcher-q"; done
timeout 60 python3 benchmarks/experiments/partition_sweep.py --reps 20 --points $P --json "$OUT/qpath16.json" 2>&1 \
  | grep -v -i warn > "$OUT/qpath16.log"; cat "$OUT/qpath16.log"
