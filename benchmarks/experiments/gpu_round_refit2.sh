# GPU: (1) 64x64 plans with q converted by the dependent-launch conversion kernel (first tile prefetched) against
# the in-kernel scratch-row conversion they use now, CSA and HCA h=64 at the planner's partitions; (2) the
# b = 1..256 curves of CSA and HCA at h=16 with the re-fitted planner.
#   bash benchmarks/experiments/gpu_round_refit2.sh <git-sha>   (writes under $OUT; about 4 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
A=64x64x8x1; P=""
for x in 34:3 48:5 64:5 67:6 96:10 128:10 133:11 148:12 199:16 256:20; do
  P="$P csa:${x%%:*}:$A:${x##*:} csa:${x%%:*}:$A:${x##*:}:launcher-q"; done
for x in 32:6 48:7 64:9 96:14 128:18 256:36; do
  P="$P hca:${x%%:*}:$A:${x##*:} hca:${x%%:*}:$A:${x##*:}:launcher-q"; done
timeout 120 python3 benchmarks/experiments/partition_sweep.py --reps 20 --points $P --json "$OUT/qpath.json" 2>&1 \
  | grep -v -i warn > "$OUT/qpath.log"
timeout 110 python3 -m wavemla.cli bench --mode csa --s-q 1 --heads 16 --batch $(seq 1 256) --reps 5 \
  --json "$OUT/curve_h16_csa.json" --label "${1:-unlabelled}" > "$OUT/curve_h16_csa.log" 2>&1; echo "csa h16 exit $?"
timeout 110 python3 -m wavemla.cli bench --mode hca --s-q 1 --heads 16 --batch $(seq 1 256) --reps 5 \
  --json "$OUT/curve_h16_hca.json" --label "${1:-unlabelled}" > "$OUT/curve_h16_hca.log" 2>&1; echo "hca h16 exit $?"
cat "$OUT/qpath.log" | awk '{print $1, $2, $3, $NF=="ok" ? $(NF-4) : "?", $0 ~ /MISMATCH|ERROR/ ? "BAD" : ""}'
