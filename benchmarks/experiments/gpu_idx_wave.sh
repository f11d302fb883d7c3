#!/usr/bin/env bash
# The indexer's score grid as one wave of resident programs (wave_rows), on the GPU in one call: the indexer's
# GPU-marked tests, the score kernel and whole calls at several grids (idx_rpp.py, Triton's launch path), the package
# against the indexer before the change (idx_ab.py, launch replays as shipped), the GPU tests of the code changed
# since the last GPU lane (stress, V3.2 sparse decode and its lists, the API, transformers' attention, the mask
# lists, the indexer benchmark), then the indexer's other tests run natively. Output under $OUT: wave.log,
# idx-rpp.json, idx-ab.json.
#   git show <before>:src/wavemla/kernels/indexer.py > .devcarry/indexer_before.py   (an ignored folder, carried)
#   OUT=/some/dir bash benchmarks/experiments/gpu_idx_wave.sh <git-sha> [the indexer.py before]
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  step 120 python3 -m pytest tests/kernels/test_indexer.py -q $X -p no:cacheprovider -m gpu
  step 60 python3 benchmarks/experiments/idx_rpp.py "$OUT/idx-rpp.json" 8:32768 32:32768 64:32768 128:32768 \
    32:262144 --variants auto static w1 --slots 396
  step 90 python3 benchmarks/experiments/idx_ab.py "$OUT/idx-ab.json" "${2:-.devcarry/indexer_before.py}" \
    8:32768 32:32768 64:32768 128:32768 32:262144
  step 120 python3 -m pytest tests/tools/test_stress.py -q -p no:cacheprovider -p no:xdist
  step 100 python3 -m pytest tests/test_sparse_v32.py tests/test_api.py tests/test_hf_attention.py \
    tests/kernels/test_v32_lists.py tests/kernels/test_mask_lists.py tests/tools/test_bench_indexer.py -q $X \
    -p no:cacheprovider
  step 150 python3 -m pytest tests/kernels/test_indexer.py -q $X -p no:cacheprovider -x -m "not gpu"
} 2>&1 | quiet | tee "$OUT/wave.log" | tail -60
