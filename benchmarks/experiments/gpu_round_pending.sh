#!/usr/bin/env bash
# GPU: the tests added without a GPU, in one call: the dense decode's hostile inputs (100 GPU cases) and the demo
# tests (sparse, dense, dense FP8); the indexer's tests, its hostile counts included (the int32 fix of _visible_rows);
# the dense stress runs; the scratch-rows test along the sm_80 and sm_120 code paths; then the dense demo, for its
# time. About 9 minutes on a cold machine.
#   bash benchmarks/experiments/gpu_round_pending.sh SHA   (writes $OUT/pending.log)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{
echo "commit ${1:-unknown}"
timeout 180 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_hostile_dense.py tests/tools/test_demo.py -rf \
  2>&1 | tail -6
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 8 tests/kernels/test_indexer.py -rf 2>&1 | tail -6
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/tools/test_stress.py -k dense -rf 2>&1 | tail -4
for arch in sm80 sm120; do
  TRITON_OVERRIDE_ARCH=$arch timeout 50 python3 -m pytest -q -p no:cacheprovider -rf \
    tests/kernels/test_dense_decode.py -k p_scratch_rows_match 2>&1 | tail -2
done
timeout 40 python3 -m wavemla.cli demo --dense
} 2>&1 | grep -v -E 'Warning[:(]|warner\(' | tee "$OUT/pending.log"
