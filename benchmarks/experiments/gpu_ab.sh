# GPU: q through the kernel's scratch rows vs converted before the launch (":launcher-q"), and the re-fitted
# planner's picks next to the alternatives they beat in the model (h=64, s_q=1, FP8; fp64-reference checked).
#   bash benchmarks/experiments/gpu_ab.sh   (writes under $OUT; about 2 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
A=64x64x8x1; B=64x32x8x1; C=16x32x4x1
timeout 280 python3 benchmarks/experiments/partition_sweep.py --reps 30 --json "$OUT/ab.json" --points \
  csa:1:$C:1 csa:1:$C:1:launcher-q csa:8:$C:4 csa:8:$C:4:launcher-q csa:8:$C:3 csa:8:$C:3:launcher-q \
  csa:128:$A:10 csa:128:$A:10:launcher-q csa:96:$A:10 csa:96:$A:10:launcher-q \
  csa:17:default csa:17:$C:5 csa:40:default csa:40:$B:7 csa:67:default csa:67:$A:10 csa:72:default csa:72:$A:10 \
  hca:32:default hca:32:$B:9 hca:16:default hca:16:$B:4 hca:155:default hca:155:$A:24 \
  2>&1 | grep -v -i warn | tee "$OUT/ab.log"
