# Score-kernel tile / pipeline-depth sweep of the indexer: bash benchmarks/experiments/idx_tiles.sh
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
E=benchmarks/experiments
timeout 200 python3 -m pytest tests/kernels/test_indexer.py -q -x -p no:cacheprovider 2>&1 | tail -2
timeout 360 python3 $E/idx_prof.py 64:32768:fp8q:128,4,3 64:32768:fp8q:128,4,5 64:32768:fp8q:128,4,6 \
  64:32768:fp8q:64,4,5 64:32768:fp8q:128,8,5 64:32768:fp8q:256,8,5 64:32768:fp8:128,4,5 \
  64:32768:bf16:64,4,3 64:32768:bf16:64,4,5 64:32768:bf16:128,4,4 64:32768:bf16:128,8,4 \
  128:262144:fp8q:128,4,5 128:262144:fp8q:128,4,6 2>&1 | grep -v Warn | tee $OUT/idx_tiles.log
