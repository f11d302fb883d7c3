#!/usr/bin/env bash
# GPU: the kernel tests and the demo along the sm_80 and sm_120 code paths on the H200 (TRITON_OVERRIDE_ARCH; see
# benchmarks/portable_gpu.sh), each architecture in a fixed share of one call, 16 pytest workers.
#   bash benchmarks/experiments/gpu_round_portable.sh SHA   (writes $OUT/portable-<arch>.log)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
echo "commit ${1:-unknown}"
for arch in ${ARCHS:-sm80 sm120}; do
  {
    echo "#### TRITON_OVERRIDE_ARCH=$arch"
    TRITON_OVERRIDE_ARCH=$arch timeout 60 python3 -m wavemla demo 2>&1 | tail -3
    TRITON_OVERRIDE_ARCH=$arch timeout "${LIMIT:-220}" python3 -m pytest tests/kernels -q -n 16 -p no:cacheprovider \
      -rf 2>&1 | tail -12
    echo "exit ${PIPESTATUS[0]}"
  } 2>&1 | grep -v -E 'Warning[:(]|warner\(' | tee "$OUT/portable-$arch.log"
done
