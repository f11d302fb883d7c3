#!/usr/bin/env bash
# GPU: the tests added without a GPU, in one call: the dense decode's hostile inputs (100 GPU cases), the dense
# stress runs, the demo tests (sparse, dense, dense FP8), and the scratch-rows test along the sm_80 and sm_120 code
# paths; then both demos, for their times.
#   bash benchmarks/experiments/gpu_round_pending.sh SHA   (writes $OUT/pending.log)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{
echo "commit ${1:-unknown}"
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_hostile_dense.py tests/tools/test_demo.py -rf \
  2>&1 | tail -6
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/tools/test_stress.py -k dense -rf 2>&1 | tail -4
for arch in sm80 sm120; do
  TRITON_OVERRIDE_ARCH=$arch timeout 90 python3 -m pytest -q -p no:cacheprovider -rf \
    tests/kernels/test_dense_decode.py -k p_scratch_rows_match 2>&1 | tail -2
done
timeout 60 python3 -m wavemla.cli demo
timeout 60 python3 -m wavemla.cli demo --dense
timeout 60 python3 -m wavemla.cli demo --dense --fp8
} 2>&1 | grep -v -E 'Warning[:(]|warner\(' | tee "$OUT/pending.log"
