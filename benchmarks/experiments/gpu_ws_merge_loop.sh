#!/usr/bin/env bash
# GPU: the batch-invariant build whose in-program merge is one loop over (64-column box, piece) instead of unrolled
# passes (that build 7,712 SASS instructions instead of 9,776 as built on the H200:
# 2026-12-02-sparse-ws-ptx-size-triton36.txt), against the build before it (its src tree under build/oldsrc, carried
# with the call): the batch-invariance and warp-specialized kernel GPU tests on the new build, bi_cost.py (median of
# 10) on the old tree and on the new one at b = 32..256 (one JSON of both, bi_ab.py), then Nsight Compute on the new
# build's batch-invariant CSA b=128 call (gpu_prof_ws.sh's counters: instruction-fetch stalls) and the Triton cache's
# SASS listings.
#   git archive OLD src/wavemla | tar -x -C build/oldsrc; BUDGET=420 bash benchmarks/experiments/gpu_ws_merge_loop.sh SHA
set -uo pipefail
export OUT=${OUT:-$PWD/gpu-lane-out}
bash "$(dirname "$0")/gpu_bi_ab.sh" ws_merge_loop "$@"
MODES=bi bash "$(dirname "$0")/gpu_prof_ws.sh"
# the kernels' SASS with line numbers as built there (its ptxas), to map the per-SASS counters to source lines
ND=$(python3 -c "import triton, pathlib; print(pathlib.Path(triton.__file__).parent / 'backends/nvidia/bin/nvdisasm')")
mkdir -p /tmp/ws_sass && i=0
for f in $(ls -t ~/.triton/cache/*/_sparse_mla_decode_ws_kernel.cubin 2>/dev/null); do
  i=$((i + 1)); "$ND" -c -g "$f" > /tmp/ws_sass/k$i.sass; cp "$(dirname "$f")"/*.json /tmp/ws_sass/k$i.json 2>/dev/null
done
tar -czf "$OUT/ws_sass.tgz" -C /tmp ws_sass
