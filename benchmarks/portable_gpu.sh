#!/usr/bin/env bash
# The portable code paths on a newer GPU: Triton builds every kernel along an older architecture's path
# (TRITON_OVERRIDE_ARCH=smNN: mma.sync instead of wgmma, no hardware e4m3 conversion on sm80/86, no dependent
# launch below sm90; only ptxas targets the GPU present) and wavemla makes its architecture choices for that
# architecture. Runs the kernel tests (natively, checked against the fp64 reference; TEST_PATHS, a list of paths
# separated by blanks or newlines, instead where given) and `wavemla demo` per architecture. Output under $OUT:
# portable-<arch>.log. Exits 1 when a demo or a test run failed (or timed out, or was skipped for want of budget) on
# any architecture, else 0.
#   OUT=/some/dir ARCHS="sm80 sm89 sm120" bash benchmarks/portable_gpu.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
machine "${1:-unknown}"
F='Warning[:(]|warner\('
LIMIT=${LIMIT:-240}
# each path its own argument, not expanded as a pattern: as gpu_lane.sh reads TEST_PATHS
read -r -d '' -a PATHS <<< "${TEST_PATHS:-tests/kernels}"
for arch in ${ARCHS:-sm80}; do
  {
    export TRITON_OVERRIDE_ARCH=$arch
    echo "#### TRITON_OVERRIDE_ARCH=$arch"
    step 90 python3 -m wavemla demo
    step "$LIMIT" python3 -m pytest "${PATHS[@]}" -q -p no:cacheprovider $X \
      -rf 2>&1 | tail -15
  } 2>&1 | grep -v -E "$F" | tee "$OUT/portable-$arch.log"
  unset TRITON_OVERRIDE_ARCH
done
RC=0
for arch in ${ARCHS:-sm80}; do  # each step's status is in its log ("== exit N", "== skipped (budget)")
  grep -q -E "^== (exit [1-9]|skipped)" "$OUT/portable-$arch.log" && { echo "portable $arch: a step failed"; RC=1; }
done
exit "$RC"
