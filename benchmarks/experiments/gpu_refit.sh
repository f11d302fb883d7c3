# GPU: the conversion-kernel tests, then a calibration grid of the split kernel's partitions (64x32 and 64x64 tiles
# over the batches where the planner's pick changes, 16x32 at small batches; CSA and HCA at h=64, s_q=1, FP8), each
# checked against the fp64 reference and timed (CUDA graph, L2 flushed, median of 15). Feeds the re-fit of the
# sm_90 tile and segment costs in wavemla/plan.py.
#   bash benchmarks/experiments/gpu_refit.sh   (writes under $OUT; about 5 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 100 python3 -m pytest tests/kernels/test_sparse_decode.py -m gpu -q -p no:cacheprovider -p no:xdist \
  -k "q_conversion or converted_before or bf16_q_over" 2>&1 | tail -2 | tee "$OUT/tests.log"
A=64x64x8x1; B=64x32x8x1; C=16x32x4x1
P=""
for x in 1:1 2:1 4:1 8:1 8:2 16:2 17:2 20:2 24:2 26:3 32:3 32:4 34:3 34:4 40:4 48:4 48:5 56:5 64:5 66:5 67:6 67:10 \
  72:6 80:7 80:10 96:8 96:10 112:10 128:10 132:10 133:11 133:20 140:11 148:12 148:13 159:13 176:15 199:16 224:20 256:20; do
  P="$P csa:${x%%:*}:$A:${x##*:}"; done
for x in 1:1 2:1 4:1 8:2 12:2 16:3 17:3 20:4 24:4 26:4 27:5 32:5 34:6 34:5 40:7 48:8 56:9 64:10 66:10 67:11 72:11 \
  80:13 96:15 112:17 128:20 133:21 148:23; do P="$P csa:${x%%:*}:$B:${x##*:}"; done
for x in 1:1 2:1 4:2 8:3 8:5 12:4 16:5 17:6 20:7 24:8 32:10; do P="$P csa:${x%%:*}:$C:${x##*:}"; done
for x in 1:1 8:2 16:3 17:3 32:5 32:6 34:5 48:7 64:9 66:9 67:10 80:11 96:14 128:18 133:19 148:21 256:36; do
  P="$P hca:${x%%:*}:$A:${x##*:}"; done
for x in 1:2 8:3 16:5 17:5 32:9 34:10 48:13 64:18 96:27 128:36; do P="$P hca:${x%%:*}:$B:${x##*:}"; done
for x in 1:2 8:5 16:9; do P="$P hca:${x%%:*}:$C:${x##*:}"; done
timeout 420 python3 benchmarks/experiments/partition_sweep.py --reps 15 --points $P --json "$OUT/refit.json" 2>&1 \
  | grep -v -i warn | tee "$OUT/refit.log" | tail -5
echo "points: $(grep -c ' us ' "$OUT/refit.log")  errors: $(grep -c ERROR "$OUT/refit.log")  mismatches: $(grep -c MISMATCH "$OUT/refit.log")"
