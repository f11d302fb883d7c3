#!/usr/bin/env bash
# GPU: the calibration grid of gpu_refit.sh (64x32 and 64x64 tiles over the batches where the planner's pick changes,
# 16x32 at small batches; CSA and HCA at h=64, s_q=1, FP8) on the kernel with the L2 policies, every 64x64 program of
# 3+ tiles on the launcher's q path (":launcher-q", which 64-head tiles take anyway): the data of the sm_90 re-fit
# (fit_sm90.py). Each point is checked against the fp64 reference, then timed (CUDA graph, L2 flushed, median).
#   BUDGET=360 bash benchmarks/experiments/gpu_round_refit6.sh   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-360}
. "$(dirname "$0")/../budget.sh"
A=64x64x8x1; B=64x32x8x1; C=16x32x4x1
a() { if [ "${1##*:}" -ge 3 ]; then echo "$1:launcher-q"; else echo "$1"; fi; }
P=""
for x in 1:1 2:1 4:1 8:1 8:2 16:2 17:2 20:2 24:2 26:3 32:3 32:4 34:3 34:4 40:4 48:4 48:5 56:5 64:5 66:5 67:6 67:10 \
  72:6 80:7 80:10 96:8 96:10 112:10 128:10 132:10 133:11 133:20 140:11 148:12 148:13 159:13 176:15 199:16 224:20 256:20; do
  P="$P $(a csa:${x%%:*}:$A:${x##*:})"; done
for x in 1:1 2:1 4:1 8:2 12:2 16:3 17:3 20:4 24:4 26:4 27:5 32:5 34:6 34:5 40:7 48:8 56:9 64:10 66:10 67:11 72:11 \
  80:13 96:15 112:17 128:20 133:21 148:23; do P="$P csa:${x%%:*}:$B:${x##*:}"; done
for x in 1:1 2:1 4:2 8:3 8:5 12:4 16:5 17:6 20:7 24:8 32:10; do P="$P csa:${x%%:*}:$C:${x##*:}"; done
for x in 1:1 8:2 16:3 17:3 20:3 20:4 22:3 22:4 23:4 26:4 32:5 32:6 34:5 48:7 64:9 66:9 67:10 80:11 96:14 128:18 133:19 148:21 256:36; do
  P="$P $(a hca:${x%%:*}:$A:${x##*:})"; done
for x in 1:2 8:3 16:5 17:5 20:6 22:6 23:7 26:7 32:9 34:10 48:13 64:18 96:27 128:36; do P="$P hca:${x%%:*}:$B:${x##*:}"; done
for x in 1:2 8:5 16:9; do P="$P hca:${x%%:*}:$C:${x##*:}"; done
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step 340 python3 benchmarks/experiments/partition_sweep.py --reps 12 --points $P --json "$OUT/refit6.json"
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/refit6.log"
echo "points: $(grep -c ' us ' "$OUT/refit6.log")  errors: $(grep -c ERROR "$OUT/refit6.log")  mismatches: $(grep -c MISMATCH "$OUT/refit6.log")"
tail -3 "$OUT/refit6.log"
