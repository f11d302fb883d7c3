#!/usr/bin/env bash
# GPU: profiler traces of `transformers serve --continuous-batching` at several concurrencies
# (benchmarks/experiments/hf_serve_trace.py), and `wavemla trace` over them. The GPU machine has no network: the
# wheels of transformers[serving] and what it needs beyond torch come in .whl/, an ignored folder beside the
# checkout (29 MB), made on a machine with one by
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
#     --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
#     -d .whl -r benchmarks/experiments/hf_serve_wheels.txt
#   bash benchmarks/experiments/gpu_hf_serve.sh <git-sha>   (writes under $OUT: hf_serve.log, the traces in hf/, and
#   hf_record.tar.gz with the run's record, the trace fit and the traces cut for the tests)
set -uo pipefail
SHA=${1:-unknown}
{
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
  python3 -m pip install -q --no-index --no-deps .whl/*.whl 2>&1 | tail -3
  python3 -c "import torch, transformers, fastapi, uvicorn, openai; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  echo "== hf_serve_trace.py on $SHA"
  PYTHONPATH=src:. timeout "${LIMIT:-480}" python3 benchmarks/experiments/hf_serve_trace.py "$OUT/hf" --batch ${BATCH:-1 8 16 32 64}
  echo "== exit $?"
  # A call brings back at most 8 files: the run's record, its trace fit and the cut fixtures go in one archive
  tar -czf "$OUT/hf_record.tar.gz" -C "$OUT/hf" --remove-files hf-serve-dsv3.json hf-serve-dsv3-slope.json fixtures
} > "$OUT/hf_serve.log" 2>&1
grep -v -E "HTTP/1.1|^INFO|nanobind|leaked" "$OUT/hf_serve.log" | cut -c1-200 | tail -45
