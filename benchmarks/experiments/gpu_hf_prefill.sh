#!/usr/bin/env bash
# transformers' DeepSeek-V4 prefill through wavemla.hf_attention on the GPU: its tests (where transformers is
# installed) and benchmarks/experiments/hf_prefill.py. Output under $OUT: hf-prefill.log, hf-prefill.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_hf_prefill.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-400}
source benchmarks/budget.sh
SHA=${1:-unknown}
{
  machine "$SHA"
  python3 -c "import transformers; print('transformers', transformers.__version__)" 2>&1 | tail -1
  step 150 python3 -m pytest tests/test_hf_attention.py -q -p no:cacheprovider $X
  step 240 python3 benchmarks/experiments/hf_prefill.py --tokens 1024 4096 --json "$OUT/hf-prefill.json"
} 2>&1 | tee "$OUT/hf-prefill.log"
echo "== table"
grep -E "transformers|passed|failed|skipped|layer|sliding|csa|hca" "$OUT/hf-prefill.log" | tail -12
