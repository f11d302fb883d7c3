#!/usr/bin/env bash
# Tile configurations of the sparse (or, with DENSE=1, the dense) decode along the portable code paths
# (TRITON_OVERRIDE_ARCH, see benchmarks/portable_gpu.sh), timed on the GPU present with `wavemla bench --configs`:
# which tile the mma.sync path runs fastest, against the planner's pick. Output under $OUT:
# portable-tiles-[dense-]<arch>.{json,log}. DENSE=1: bf16 rows, s_k 4096, CONFIGS defaulting to the dense candidates
# for h > 32.
#   OUT=/some/dir ARCHS="sm80 sm120" bash benchmarks/portable_tiles.sh <git-sha>
#   OUT=/some/dir ARCHS=sm80 DENSE=1 BATCH=32 bash benchmarks/portable_tiles.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
machine "${1:-unknown}"
F='Warning[:(]|warner\('
if [ "${DENSE:-0}" = 1 ]; then
  CONFIGS=${CONFIGS:-64x64x8x2 32x32x8x3 16x32x4x3 16x16x4x3}
  WHAT="--dense --seqlen 4096 --lengths uniform --kv-formats bf16"
else
  CONFIGS=${CONFIGS:-64x64x8x1 64x32x8x1 32x32x8x1 16x32x4x1 16x16x4x1}
  WHAT="--mode csa"
fi
TAG=$([ "${DENSE:-0}" = 1 ] && echo dense- || true)
for arch in ${ARCHS:-sm80}; do
  export TRITON_OVERRIDE_ARCH=$arch
  {
    echo "#### TRITON_OVERRIDE_ARCH=$arch"
    step ${LIMIT:-200} python3 -m wavemla bench $WHAT --batch ${BATCH:-64} --heads ${HEADS:-64} --reps 15 \
      --configs $CONFIGS --json "$OUT/portable-tiles-$TAG$arch.json" --label "${1:-unknown} $arch"
  } 2>&1 | grep -v -E "$F" | tee "$OUT/portable-tiles-$TAG$arch.log"
  unset TRITON_OVERRIDE_ARCH
done
