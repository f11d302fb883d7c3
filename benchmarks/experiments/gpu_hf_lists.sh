#!/usr/bin/env bash
# transformers' attention calls with the index lists built by kernels/mask_lists.py: the lists' and the hf tests on the
# GPU, then hf_prefill.py (eager vs wavemla per layer kind) and hf_prefill_host.py (where a 1K-token call's time goes).
# Output under $OUT: hf-lists.log, hf-prefill.json.
#   OUT=/some/dir bash benchmarks/experiments/gpu_hf_lists.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-400}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  python3 -c "import transformers; print('transformers', transformers.__version__)" 2>&1 | tail -1
  step 150 python3 -m pytest tests/kernels/test_mask_lists.py tests/test_hf_attention.py -q -p no:cacheprovider $X
  step 100 python3 benchmarks/experiments/hf_prefill.py --tokens 1024 4096 --json "$OUT/hf-prefill.json"
  step 100 python3 benchmarks/experiments/hf_prefill_host.py --tokens 1024 --kinds sliding csa
} 2>&1 | quiet > "$OUT/hf-lists.log"
echo "== table"
grep -E "^commit|H[12]00|transformers|passed|failed|sliding|csa |hca |== |aten::|cudaLaunch|Self CPU time" \
  "$OUT/hf-lists.log" | cut -c1-170 | tail -60
