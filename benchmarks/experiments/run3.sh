set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
E=benchmarks/experiments; M=$E/variants/sd_next.py  # bash benchmarks/experiments/materialize.sh; carry the folder
timeout 300 python3 $E/vtime.py $M 8,32,64,128 --hca src:64x64x8x1 src:64x32x8x1 p3bn32:64x32x8x1:native=1\;prefetch=3 \
  n1p1s2bn32:64x32x8x2:native=1\;prefetch=1 2>&1 | tee $OUT/vtime3.log | grep -v "^$"
timeout 150 python3 $E/vtime.py $M 1,8,32 --split-only src:64x64x8x1 src:64x32x8x1 2>&1 | tee $OUT/vtime3s.log | grep -v "^$"
