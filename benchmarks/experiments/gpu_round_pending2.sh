#!/usr/bin/env bash
# GPU: what changed after 7dd9dde's pending round, in one call: the FlashMLA module stand-in's tests (sparse and
# dense decode through `import flash_mla`, the sitecustomize recipe through a spawned process); the indexer's tests
# with the hostile-count test split per select path; the stress tests after the cross-stream noise fix; the dense
# decode's two sanitizer steps that have not run (the shared-metadata negative control, memcheck under graphs);
# transformers' DeepSeek-V4 decoding through wavemla.hf_attention (bf16) and its indexer against ours (fp16
# queries), with a transformers that has the model
# carried as a wheel in .whl (run with carry [".whl"]; the image's 5.17 may lack it, and the test then skips).
# About 8 minutes on a cold machine.
#   bash benchmarks/experiments/gpu_round_pending2.sh SHA   (writes $OUT/pending2.log, $OUT/sanitizers.*)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
{
echo "commit ${1:-unknown}"
python3 -c "import transformers; print('transformers', transformers.__version__)"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_hf_attention.py tests/kernels/test_indexer_vs_transformers.py \
  -rf -rs 2>&1 | tail -4
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_flash_mla.py -rf 2>&1 | tail -3
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 8 tests/kernels/test_indexer.py -rf --durations=4 2>&1 | tail -9
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/tools/test_stress.py -rf 2>&1 | tail -3
SANITIZERS="negative-share-metadata-dense memcheck-dense-graphs" bash benchmarks/sanitizers.sh
} 2>&1 | grep -v -E 'Warning[:(]|warner\(' | tee "$OUT/pending2.log"
