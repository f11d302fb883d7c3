#!/usr/bin/env bash
# GPU: transformers' DeepSeek-V4 through wavemla.hf_attention, in one call: its tests (bf16 decode calls against
# fp64 eager attention, fp16 generation against the eager model), the sparse decode's kernel tests, then profiler
# traces of the model decoding at b = 1, 8, 32, 64 with transformers' eager attention and with wavemla's, each
# analysed by `wavemla trace` (benchmarks/experiments/hf_dsv4_trace.py), and eager at b = 1 and 64 with Python frames,
# analysed with `--scope` (hf_dsv4_trace.py --stack). Needs a transformers with DeepSeek-V4: the
# wheel in .whl is installed when present (run with carry [".whl"]). About 6 minutes on a cold machine.
#   bash benchmarks/experiments/gpu_hf_round.sh SHA   (writes $OUT/hf_round.log and $OUT/hf.tar.gz)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
HF=$(mktemp -d)
{
echo "commit ${1:-unknown}"
python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_hf_attention.py -rf --tb=short 2>&1 | tail -4
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 16 tests/kernels/test_sparse_decode.py -rf 2>&1 | tail -4
for a in eager wavemla; do
  timeout 150 python3 benchmarks/experiments/hf_dsv4_trace.py "$HF" --attn $a 2>&1 | grep -v -E 'Warning|warn|output = func'
  echo "rc=${PIPESTATUS[0]}"
done
# eager attention again with Python frames: `wavemla trace --scope` gives its GEMMs and softmax back to attention
timeout 150 python3 benchmarks/experiments/hf_dsv4_trace.py "$HF/stack" --attn eager --stack --batch 1 64 2>&1 \
  | grep -v -E 'Warning|warn|output = func'
echo "rc=${PIPESTATUS[0]}"
} 2>&1 | tee "$OUT/hf_round.log"
tar -C "$HF" -czf "$OUT/hf.tar.gz" .
