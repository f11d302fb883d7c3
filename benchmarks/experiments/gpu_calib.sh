# GPU: kernel tests, then a calibration grid of the split kernel's partitions (tile shape x tiles per program) at
# DSV4 shapes (h=64, s_q=1, FP8), each checked against the fp64 reference and timed (CUDA graph, L2 flushed).
#   bash benchmarks/experiments/gpu_calib.sh   (writes under $OUT; about 4 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 170 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_determinism.py -m gpu -q -p no:cacheprovider -p no:xdist 2>&1 | tail -2 | tee "$OUT/tests.log"
A=64x64x8x1; B=64x32x8x1; C=16x32x4x1; D=16x16x4x1
P=""
for x in 8:1 8:2 16:2 32:3 32:5 48:4 64:5 64:10 80:7 80:10 96:8 96:10 128:10 256:20; do P="$P csa:${x%%:*}:$A:${x##*:}"; done
for x in 8:2 16:3 32:5 32:10 64:10 64:20 80:13 128:20 256:40; do P="$P csa:${x%%:*}:$B:${x##*:}"; done
for x in 32:5 80:13; do P="$P csa:${x%%:*}:$B:${x##*:}:launcher-q"; done
for x in 1:1 8:3 8:5 16:5; do P="$P csa:${x%%:*}:$C:${x##*:}"; done
P="$P csa:1:$D:1 csa:1:$C:2"
for x in 32:5 32:9 64:9 128:18; do P="$P hca:${x%%:*}:$A:${x##*:}"; done
for x in 32:9 64:18 128:36; do P="$P hca:${x%%:*}:$B:${x##*:}"; done
P="$P hca:32:$B:9:launcher-q"
timeout 300 python3 benchmarks/experiments/partition_sweep.py --reps 20 --points $P --json "$OUT/calib.json" 2>&1 | grep -v -i warn | tee "$OUT/calib.log"
